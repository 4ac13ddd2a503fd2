// A scripted rule's text pattern, compiled the one way both `crewlet validate` and the
// running provider compile it: a pattern that does not compile is refused at load with
// its field named, never discovered at the first turn.

/**
 * Compiles a rule's text pattern. Go/PCRE-style leading inline flags (`(?i)plan`, as a
 * YAML author would write them) become JavaScript flags, since JS has no inline syntax.
 */
export function compilePattern(source: string): RegExp {
  const m = /^\(\?([imsu]+)\)/.exec(source);
  if (!m) return new RegExp(source, "u");
  const flags = new Set([...m[1]!, "u"]);
  return new RegExp(source.slice(m[0].length), [...flags].join(""));
}

/** Why `source` does not compile, or null when it does. */
export function patternProblem(source: string): string | null {
  try {
    compilePattern(source);
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

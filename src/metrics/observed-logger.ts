// A Logger that shows every line to an observer (the node's metrics) before the inner
// logger's level filter: a debug line such as model_called or duty_tick counts even when
// the log is at info. Children observe too, with their bound fields.
import type { Fields, Logger } from "../log.ts";

export type Observer = (event: string, fields: Fields) => void;

export function observedLogger(inner: Logger, observe: Observer, base: Fields = {}): Logger {
  const seen = (event: string, fields?: Fields) => {
    try {
      observe(event, { ...base, ...fields });
    } catch {
      // observability never breaks the work
    }
  };
  return {
    debug: (event, fields) => (seen(event, fields), inner.debug(event, fields)),
    info: (event, fields) => (seen(event, fields), inner.info(event, fields)),
    warn: (event, fields) => (seen(event, fields), inner.warn(event, fields)),
    error: (event, fields) => (seen(event, fields), inner.error(event, fields)),
    child: (fields) => observedLogger(inner.child(fields), observe, { ...base, ...fields }),
  };
}

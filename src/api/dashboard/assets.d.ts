// Dashboard assets are imported as text (`with { type: "text" }`) so `bun build --compile`
// embeds them in the binary; these tell the typechecker such an import is a string.
declare module "*.css" {
  const text: string;
  export default text;
}
declare module "*.client.js" {
  const text: string;
  export default text;
}
declare module "*.esm.js" {
  const text: string;
  export default text;
}
declare module "*.mjs" {
  const text: string;
  export default text;
}

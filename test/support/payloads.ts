/**
 * `depth` arrays around `count` numbers: job data that is small stored but deeply nested. `JSON.stringify` with an
 * indent writes every number at its full depth: 2,000 levels around 20,000 numbers (~113 KB stored) is ~80 MB of text.
 */
export function nestedPayload(depth: number, count: number): unknown {
  let value: unknown = Array.from({ length: count }, (_, n) => n);
  for (let level = 0; level < depth; level++) value = [value];
  return value;
}

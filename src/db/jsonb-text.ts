// The size limits of jsonb columns are CHECKs on octet_length(column::text), and PostgreSQL renders
// jsonb as text differently from JSON.stringify: a space after every ':' and ',', and numbers as the
// numeric type prints them (1e-7 becomes 0.0000001). A size checked on JSON.stringify therefore
// passes values the database then refuses. jsonbTextBytes measures what the CHECK measures.

/** A number as PostgreSQL's numeric prints the JSON.stringify text of it (plain digits, no exponent). */
function numericText(n: number): string {
  const text = JSON.stringify(n); // non-finite numbers become null, as they do on the way to the database
  const e = text.search(/e/i);
  if (e < 0) return text;
  const negative = text.startsWith('-');
  const mantissa = text.slice(negative ? 1 : 0, e);
  const exponent = Number(text.slice(e + 1));
  const [whole, fraction = ''] = mantissa.split('.');
  const digits = whole! + fraction;
  const point = whole!.length + exponent; // position of the decimal point within digits
  let plain: string;
  if (point <= 0) plain = `0.${'0'.repeat(-point)}${digits}`;
  else if (point >= digits.length) plain = digits + '0'.repeat(point - digits.length);
  else plain = `${digits.slice(0, point)}.${digits.slice(point)}`;
  return (negative ? '-' : '') + plain;
}

function render(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'number') return numericText(value);
  if (typeof value === 'string' || typeof value === 'boolean') return JSON.stringify(value);
  if (Array.isArray(value)) return value.length === 0 ? '[]' : `[${value.map(render).join(', ')}]`;
  const entries = Object.entries(value as Record<string, unknown>);
  return entries.length === 0 ? '{}' : `{${entries.map(([k, v]) => `${JSON.stringify(k)}: ${render(v)}`).join(', ')}}`;
}

/** The text PostgreSQL gives for `value::jsonb::text` (key order aside, which does not change its size). */
export function jsonbText(value: unknown): string {
  // The value as it reaches the database: toJSON applied, undefined members dropped.
  const json = JSON.stringify(value);
  return json === undefined ? 'null' : render(JSON.parse(json));
}

/** octet_length(value::jsonb::text): what the 2048-byte CHECKs of outcome and detail measure. */
export function jsonbTextBytes(value: unknown): number {
  return Buffer.byteLength(jsonbText(value));
}

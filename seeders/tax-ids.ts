// Brazilian tax ids with correct check digits (mod 11), for sample data: CPF (people, 11 digits) and
// CNPJ (companies, 14 digits). The DevSeeder derives them from fixed bases so they are syntactically
// valid and stable between runs; the bases are arbitrary and not known to belong to anyone.

function mod11Digit(digits: number[], weights: number[]): number {
  const sum = digits.reduce((acc, d, i) => acc + d * weights[i]!, 0);
  const rest = sum % 11;
  return rest < 2 ? 0 : 11 - rest;
}

/** Completes a 9-digit CPF base with its two check digits. */
export function cpfFromBase(base: string): string {
  if (!/^\d{9}$/.test(base)) throw new Error('a CPF base has 9 digits');
  const d = [...base].map(Number);
  const first = mod11Digit(d, [10, 9, 8, 7, 6, 5, 4, 3, 2]);
  const second = mod11Digit([...d, first], [11, 10, 9, 8, 7, 6, 5, 4, 3, 2]);
  return `${base}${first}${second}`;
}

/** Completes a 12-digit CNPJ base (8 root + 4 branch digits) with its two check digits. */
export function cnpjFromBase(base: string): string {
  if (!/^\d{12}$/.test(base)) throw new Error('a CNPJ base has 12 digits');
  const d = [...base].map(Number);
  const first = mod11Digit(d, [5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2]);
  const second = mod11Digit([...d, first], [6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2]);
  return `${base}${first}${second}`;
}

/** True for an 11-digit CPF with correct check digits (repeated digits are rejected, as the Receita does). */
export function isValidCpf(value: string): boolean {
  return /^\d{11}$/.test(value) && !/^(\d)\1{10}$/.test(value) && cpfFromBase(value.slice(0, 9)) === value;
}

/** True for a 14-digit CNPJ with correct check digits. */
export function isValidCnpj(value: string): boolean {
  return /^\d{14}$/.test(value) && !/^(\d)\1{13}$/.test(value) && cnpjFromBase(value.slice(0, 12)) === value;
}

// The reference catalog as JSON files under catalog/, validated with zod (shape) and cross-checked
// (references between files) BEFORE the CatalogSeeder writes anything. A failure names the file, the
// path inside it and the rule broken.
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { SeederError } from './seeder-error.ts';

export const CATALOG_DIR = 'catalog';
export const CATALOG_FILES = {
  financialInstitutions: 'financial-institutions.json',
  productGroups: 'product-groups.json',
  operationTypes: 'operation-types.json',
  products: 'products.json',
  offers: 'offers.json',
} as const;

const code = z.string().regex(/^[a-z][a-z0-9_]{0,62}$/, { error: 'must be a lowercase code of [a-z0-9_], starting with a letter, at most 63 characters' });
const name = z
  .string()
  .min(1, { error: 'must not be empty' })
  .max(200, { error: 'must be at most 200 characters' })
  .refine((s) => s.trim() === s, { error: 'must not start or end with spaces' });

const schemas = {
  financialInstitutions: z.array(
    z.strictObject({
      /** COMPE code of the institution: three digits, leading zeros kept. */
      code: z.string().regex(/^\d{3}$/, { error: 'must be the three-digit COMPE code, as a string (e.g. "001")' }),
      name,
    }),
  ),
  productGroups: z.array(z.strictObject({ code, name })),
  operationTypes: z.array(z.strictObject({ code, name })),
  products: z.array(
    z.strictObject({
      code,
      productGroup: code,
      name,
      operationTypes: z.array(code).min(1, { error: 'must list at least one operation type' }),
    }),
  ),
  offers: z.array(
    z.strictObject({
      financialInstitution: z.string().regex(/^\d{3}$/, { error: 'must be the three-digit COMPE code, as a string' }),
      product: code,
      operationType: code,
      name,
    }),
  ),
};

export interface Catalog {
  financialInstitutions: z.infer<typeof schemas.financialInstitutions>;
  productGroups: z.infer<typeof schemas.productGroups>;
  operationTypes: z.infer<typeof schemas.operationTypes>;
  products: z.infer<typeof schemas.products>;
  offers: z.infer<typeof schemas.offers>;
}

export interface CatalogProblem {
  /** Relative to the project root, e.g. `catalog/products.json`. */
  file: string;
  /** JSON path inside the file, e.g. `[2].productGroup`. */
  path: string;
  rule: string;
}

export class CatalogInvalidError extends SeederError {
  readonly problems: CatalogProblem[];
  constructor(problems: CatalogProblem[]) {
    super(
      'CATALOG_INVALID',
      `the reference catalog is invalid, nothing was written; fix these entries:\n` +
        problems.map((p) => `  ${p.file} ${p.path || '(whole file)'}: ${p.rule}`).join('\n'),
    );
    this.problems = problems;
  }
}

function jsonPath(segments: readonly PropertyKey[]): string {
  return segments.map((s) => (typeof s === 'number' ? `[${s}]` : `.${String(s)}`)).join('').replace(/^\./, '');
}

/** Reads and validates every catalog file of `<root>/catalog`; throws CatalogInvalidError listing all problems. */
export function loadCatalog(root: string): Catalog {
  const problems: CatalogProblem[] = [];
  const parsed: Partial<Catalog> = {};
  for (const key of Object.keys(CATALOG_FILES) as Array<keyof typeof CATALOG_FILES>) {
    const rel = `${CATALOG_DIR}/${CATALOG_FILES[key]}`;
    let json: unknown;
    try {
      json = JSON.parse(fs.readFileSync(path.join(root, CATALOG_DIR, CATALOG_FILES[key]), 'utf8'));
    } catch (error) {
      const e = error as NodeJS.ErrnoException;
      problems.push({ file: rel, path: '', rule: e.code === 'ENOENT' ? 'file is missing' : `not valid JSON (${e.message})` });
      continue;
    }
    const result = schemas[key].safeParse(json);
    if (!result.success) {
      for (const issue of result.error.issues) problems.push({ file: rel, path: jsonPath(issue.path), rule: issue.message });
      continue;
    }
    (parsed as Record<string, unknown>)[key] = result.data;
  }
  if (problems.length === 0) problems.push(...crossCheck(parsed as Catalog));
  if (problems.length > 0) throw new CatalogInvalidError(problems);
  return parsed as Catalog;
}

/** Natural keys unique within a file, and every reference resolvable inside the catalog. */
function crossCheck(c: Catalog): CatalogProblem[] {
  const problems: CatalogProblem[] = [];
  const file = (key: keyof typeof CATALOG_FILES) => `${CATALOG_DIR}/${CATALOG_FILES[key]}`;
  const uniqueBy = <T>(key: keyof typeof CATALOG_FILES, rows: T[], keyOf: (row: T) => string, field: string) => {
    const seen = new Map<string, number>();
    rows.forEach((row, i) => {
      const k = keyOf(row);
      const first = seen.get(k);
      if (first !== undefined) problems.push({ file: file(key), path: `[${i}]${field}`, rule: `duplicate natural key ${k} (first at [${first}])` });
      else seen.set(k, i);
    });
    return new Set(seen.keys());
  };
  const institutions = uniqueBy('financialInstitutions', c.financialInstitutions, (r) => r.code, '.code');
  const groups = uniqueBy('productGroups', c.productGroups, (r) => r.code, '.code');
  const operations = uniqueBy('operationTypes', c.operationTypes, (r) => r.code, '.code');
  uniqueBy('products', c.products, (r) => r.code, '.code');
  uniqueBy('offers', c.offers, (r) => `${r.financialInstitution}/${r.product}/${r.operationType}`, '');

  const admitted = new Map<string, Set<string>>();
  c.products.forEach((p, i) => {
    if (!groups.has(p.productGroup)) {
      problems.push({ file: file('products'), path: `[${i}].productGroup`, rule: `unknown product group ${p.productGroup} (not in ${file('productGroups')})` });
    }
    p.operationTypes.forEach((op, j) => {
      if (!operations.has(op)) {
        problems.push({ file: file('products'), path: `[${i}].operationTypes[${j}]`, rule: `unknown operation type ${op} (not in ${file('operationTypes')})` });
      }
    });
    admitted.set(p.code, new Set(p.operationTypes));
  });
  c.offers.forEach((o, i) => {
    if (!institutions.has(o.financialInstitution)) {
      problems.push({ file: file('offers'), path: `[${i}].financialInstitution`, rule: `unknown financial institution ${o.financialInstitution} (not in ${file('financialInstitutions')})` });
    }
    const ops = admitted.get(o.product);
    if (!ops) {
      problems.push({ file: file('offers'), path: `[${i}].product`, rule: `unknown product ${o.product} (not in ${file('products')})` });
    } else if (!ops.has(o.operationType)) {
      problems.push({ file: file('offers'), path: `[${i}].operationType`, rule: `product ${o.product} does not admit operation type ${o.operationType}` });
    }
  });
  return problems;
}

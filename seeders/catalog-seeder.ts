// CatalogSeeder: merges the reference catalog (catalog/*.json) into financial_institutions,
// product_groups, operation_types, products, product_operation_types and offers, by natural key. A
// rerun only updates, and only rows whose values differ (so updated_at moves only on a real change).
// Rows the files no longer list are left alone: other tables may reference them.
import type { TxSql } from '../src/db/client.ts';
import type { SeedContext, Seeder } from '../src/migrator/seed-runner.ts';
import { loadCatalog } from './catalog-files.ts';

interface Counts {
  inserted: number;
  updated: number;
}

/** Upsert by code; returns code -> id. `extra` columns are compared and updated with the name. */
async function mergeByCode(
  tx: TxSql,
  table: 'financial_institutions' | 'product_groups' | 'operation_types' | 'products',
  rows: Array<{ code: string; name: string; extra?: Record<string, number> }>,
  counts: Counts,
): Promise<Map<string, number>> {
  for (const row of rows) {
    const extraCols = Object.keys(row.extra ?? {});
    const cols = ['code', 'name', ...extraCols];
    const values = [row.code, row.name, ...extraCols.map((c) => row.extra![c]!)];
    const placeholders = values.map((_, i) => `$${i + 1}`).join(', ');
    const changed = ['name', ...extraCols].map((c) => `t.${c} IS DISTINCT FROM EXCLUDED.${c}`).join(' OR ');
    const set = ['name', ...extraCols].map((c) => `${c} = EXCLUDED.${c}`).join(', ');
    // xmax = 0 only for a freshly inserted row: tells an insert from an update in one statement.
    const result = await tx.unsafe(
      `INSERT INTO ${table} AS t (${cols.join(', ')}) VALUES (${placeholders})
       ON CONFLICT (code) DO UPDATE SET ${set}, updated_at = clock_timestamp() WHERE ${changed}
       RETURNING (xmax = 0) AS inserted`,
      values,
    );
    if (result.length > 0) counts[result[0]!.inserted ? 'inserted' : 'updated'] += 1;
  }
  const ids = await tx.unsafe(`SELECT code, id FROM ${table} WHERE code = ANY($1::text[])`, [rows.map((r) => r.code)]);
  return new Map(ids.map((r) => [r.code as string, Number(r.id)]));
}

export const CatalogSeeder: Seeder = {
  name: 'CatalogSeeder',
  async run(tx: TxSql, ctx: SeedContext): Promise<void> {
    // Validate every file before the first write.
    const catalog = loadCatalog(ctx.root);
    const counts: Counts = { inserted: 0, updated: 0 };

    const institutions = await mergeByCode(tx, 'financial_institutions', catalog.financialInstitutions, counts);
    const groups = await mergeByCode(tx, 'product_groups', catalog.productGroups, counts);
    const operations = await mergeByCode(tx, 'operation_types', catalog.operationTypes, counts);
    const products = await mergeByCode(
      tx,
      'products',
      catalog.products.map((p) => ({ code: p.code, name: p.name, extra: { product_group_id: groups.get(p.productGroup)! } })),
      counts,
    );

    for (const p of catalog.products) {
      for (const op of p.operationTypes) {
        const added = await tx`
          INSERT INTO product_operation_types (product_id, operation_type_id)
          VALUES (${products.get(p.code)!}, ${operations.get(op)!})
          ON CONFLICT (product_id, operation_type_id) DO NOTHING RETURNING id`;
        counts.inserted += added.length;
      }
    }

    for (const o of catalog.offers) {
      const result = await tx`
        INSERT INTO offers AS t (financial_institution_id, product_id, operation_type_id, name)
        VALUES (${institutions.get(o.financialInstitution)!}, ${products.get(o.product)!}, ${operations.get(o.operationType)!}, ${o.name})
        ON CONFLICT (financial_institution_id, product_id, operation_type_id)
          DO UPDATE SET name = EXCLUDED.name, updated_at = clock_timestamp() WHERE t.name IS DISTINCT FROM EXCLUDED.name
        RETURNING (xmax = 0) AS inserted`;
      if (result.length > 0) counts[result[0]!.inserted ? 'inserted' : 'updated'] += 1;
    }

    ctx.log(
      `catalog: ${catalog.financialInstitutions.length} institutions, ${catalog.products.length} products, ` +
        `${catalog.offers.length} offers; ${counts.inserted} row(s) inserted, ${counts.updated} updated`,
    );
  },
};

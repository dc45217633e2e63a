// The seeders of this build. `defaultSeeders` run in order, in one transaction, on `migrator deploy`
// and `migrator db-seed`; `namedSeeders` are the ones `db-seed --class <Name>` can run.
import type { Seeder } from '../src/migrator/seed-runner.ts';
import { CatalogSeeder } from './catalog-seeder.ts';
import { DevSeeder } from './dev-seeder.ts';
import { PermissionsSeeder } from './permissions-seeder.ts';
import { PlatformBootstrapSeeder } from './platform-bootstrap-seeder.ts';

/** Order matters: the bootstrap profile takes the platform permissions the PermissionsSeeder wrote. */
export const defaultSeeders: Seeder[] = [CatalogSeeder, PermissionsSeeder, PlatformBootstrapSeeder];

export const namedSeeders: Record<string, Seeder> = {
  CatalogSeeder,
  PermissionsSeeder,
  PlatformBootstrapSeeder,
  DevSeeder,
};

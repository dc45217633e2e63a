-- FROZEN: loaded by migration 0017_authorization-scope-ceiling-locks. Never edit; put a change in a new file loaded by a new migration.
--
-- Concurrency fix of the scope ceiling (0012, 0013). Without row locks, two transactions could each
-- check against the other's not yet committed state and both commit: a link inserted while its
-- permission is being rescoped, or a holder rescoped while one of its permissions is. This file
-- redefines the ceiling READS only (CREATE OR REPLACE, same signatures); triggers and the refusal stay
-- as they were. Rules:
--   * every permission and holder row a check depends on is read FOR SHARE, permission row first,
--     holder row second; a share lock conflicts with the UPDATE that changes a scope, so whichever
--     arrives second waits for the other to commit, rereads the committed row and refuses;
--   * rows are locked BEFORE their scope is compared: a filter on scope inside the locked query would
--     skip (and not lock) a row whose visible version passes while its pending version does not;
--   * a transaction that changed a holder and then links a permission being rescoped by another can
--     deadlock with it; the database aborts one of them, so the change is refused, never let through.
-- The previous versions were written in a scope-ceiling.sql that is frozen, hence this new file.

CREATE OR REPLACE FUNCTION permission_scope_ceiling_read_permission(permission_id bigint, OUT code text, OUT scope text)
RETURNS SETOF record
LANGUAGE sql VOLATILE AS $$
  SELECT p.code, p.scope FROM permissions p WHERE p.id = permission_id FOR SHARE
$$;

CREATE OR REPLACE FUNCTION permission_scope_ceiling_read_holder(holder_table text, holder_id bigint)
RETURNS text
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  found_scope text;
BEGIN
  CASE holder_table
    WHEN 'access_profiles' THEN
      SELECT h.scope INTO found_scope FROM access_profiles h WHERE h.id = holder_id FOR SHARE;
    WHEN 'access_profile_templates' THEN
      SELECT h.scope INTO found_scope FROM access_profile_templates h WHERE h.id = holder_id FOR SHARE;
    WHEN 'platform_access_profiles' THEN
      SELECT 'platform'::text INTO found_scope FROM platform_access_profiles h WHERE h.id = holder_id FOR SHARE;
    WHEN 'platform_access_profile_templates' THEN
      SELECT h.scope INTO found_scope FROM platform_access_profile_templates h WHERE h.id = holder_id FOR SHARE;
    ELSE
      RAISE EXCEPTION 'permission_scope_ceiling_read_holder: unknown holder table %', holder_table;
  END CASE;
  RETURN found_scope;
END
$$;

-- Called after a holder's own UPDATE, so the holder row is already locked; locks the linked permission
-- rows in id order, then compares.
CREATE OR REPLACE FUNCTION permission_scope_ceiling_holder_violations(holder_table text, holder_id bigint, holder_scope text,
  OUT code text, OUT scope text)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  linked record;
  accepted text[] := permission_scope_ceiling(holder_scope);
BEGIN
  CASE holder_table
    WHEN 'access_profiles' THEN
      FOR linked IN SELECT p.code, p.scope FROM access_profile_permissions l JOIN permissions p ON p.id = l.permission_id
          WHERE l.access_profile_id = holder_id ORDER BY p.id FOR SHARE OF p LOOP
        IF linked.scope <> ALL (accepted) THEN code := linked.code; scope := linked.scope; RETURN NEXT; END IF;
      END LOOP;
    WHEN 'access_profile_templates' THEN
      FOR linked IN SELECT p.code, p.scope FROM access_profile_template_permissions l JOIN permissions p ON p.id = l.permission_id
          WHERE l.template_id = holder_id ORDER BY p.id FOR SHARE OF p LOOP
        IF linked.scope <> ALL (accepted) THEN code := linked.code; scope := linked.scope; RETURN NEXT; END IF;
      END LOOP;
    WHEN 'platform_access_profiles' THEN
      FOR linked IN SELECT p.code, p.scope FROM platform_access_profile_permissions l JOIN permissions p ON p.id = l.permission_id
          WHERE l.platform_access_profile_id = holder_id ORDER BY p.id FOR SHARE OF p LOOP
        IF linked.scope <> ALL (accepted) THEN code := linked.code; scope := linked.scope; RETURN NEXT; END IF;
      END LOOP;
    WHEN 'platform_access_profile_templates' THEN
      FOR linked IN SELECT p.code, p.scope FROM platform_access_profile_template_permissions l JOIN permissions p ON p.id = l.permission_id
          WHERE l.template_id = holder_id ORDER BY p.id FOR SHARE OF p LOOP
        IF linked.scope <> ALL (accepted) THEN code := linked.code; scope := linked.scope; RETURN NEXT; END IF;
      END LOOP;
    ELSE
      RAISE EXCEPTION 'permission_scope_ceiling_holder_violations: unknown holder table %', holder_table;
  END CASE;
END
$$;

-- Called after the permission's own UPDATE, so the permission row is already locked (first); locks the
-- linked holder rows (second), then compares.
CREATE OR REPLACE FUNCTION permission_scope_ceiling_permission_violations(permission_id bigint, permission_scope text,
  OUT holder_table text, OUT holder_id bigint, OUT holder_scope text)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  linked record;
  pid bigint := permission_id;
BEGIN
  FOR linked IN SELECT h.id, h.scope FROM access_profile_permissions l JOIN access_profiles h ON h.id = l.access_profile_id
      WHERE l.permission_id = pid ORDER BY h.id FOR SHARE OF h LOOP
    IF permission_scope <> ALL (permission_scope_ceiling(linked.scope)) THEN
      holder_table := 'access_profiles'; holder_id := linked.id; holder_scope := linked.scope; RETURN NEXT;
    END IF;
  END LOOP;
  FOR linked IN SELECT h.id, h.scope FROM access_profile_template_permissions l JOIN access_profile_templates h ON h.id = l.template_id
      WHERE l.permission_id = pid ORDER BY h.id FOR SHARE OF h LOOP
    IF permission_scope <> ALL (permission_scope_ceiling(linked.scope)) THEN
      holder_table := 'access_profile_templates'; holder_id := linked.id; holder_scope := linked.scope; RETURN NEXT;
    END IF;
  END LOOP;
  FOR linked IN SELECT h.id, 'platform'::text AS scope FROM platform_access_profile_permissions l
      JOIN platform_access_profiles h ON h.id = l.platform_access_profile_id
      WHERE l.permission_id = pid ORDER BY h.id FOR SHARE OF h LOOP
    IF permission_scope <> ALL (permission_scope_ceiling(linked.scope)) THEN
      holder_table := 'platform_access_profiles'; holder_id := linked.id; holder_scope := linked.scope; RETURN NEXT;
    END IF;
  END LOOP;
  FOR linked IN SELECT h.id, h.scope FROM platform_access_profile_template_permissions l
      JOIN platform_access_profile_templates h ON h.id = l.template_id
      WHERE l.permission_id = pid ORDER BY h.id FOR SHARE OF h LOOP
    IF permission_scope <> ALL (permission_scope_ceiling(linked.scope)) THEN
      holder_table := 'platform_access_profile_templates'; holder_id := linked.id; holder_scope := linked.scope; RETURN NEXT;
    END IF;
  END LOOP;
END
$$;

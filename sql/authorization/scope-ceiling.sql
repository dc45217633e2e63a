-- FROZEN: loaded by migration 0012_authorization-scope-ceiling. Never edit; put a change in a new file loaded by a new migration.
--
-- Scope ceiling of permissions: a holder (access profile, tenant template, platform profile, platform
-- template) never holds a permission above its own scope. The matrix has ONE database source,
-- permission_scope_ceiling(); src/permissions/scope-ceiling.ts mirrors it and a test keeps both equal.
--
-- Shape: the triggers call small read functions (permission row, holder scope, permissions of a holder)
-- and one refusal function. Keeping the reads in their own functions lets a later file redefine them
-- (CREATE OR REPLACE, same signatures) without touching the triggers; 0017 does exactly that to add
-- shared row locks. The read functions are VOLATILE on purpose: each read takes a fresh snapshot under
-- READ COMMITTED, and a non-volatile function may not take row locks.
--
-- A permission or holder that does not exist is not a ceiling error: the triggers let the row through
-- and the foreign key reports it.

CREATE FUNCTION permission_scope_ceiling(holder_scope text) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE holder_scope
    WHEN 'platform' THEN ARRAY['platform']
    WHEN 'tenant' THEN ARRAY['tenant', 'broker']
    WHEN 'broker' THEN ARRAY['broker']
    ELSE ARRAY[]::text[]
  END
$$;

COMMENT ON FUNCTION permission_scope_ceiling(text) IS
  'Permission scopes a holder of this scope accepts: platform -> {platform}, tenant -> {tenant,broker}, broker -> {broker}.';

-- The permission row a ceiling check needs (no row when the permission does not exist).
CREATE FUNCTION permission_scope_ceiling_read_permission(permission_id bigint, OUT code text, OUT scope text)
RETURNS SETOF record
LANGUAGE sql VOLATILE AS $$
  SELECT p.code, p.scope FROM permissions p WHERE p.id = permission_id
$$;

-- The scope of one holder (NULL when it does not exist). holder_table names the holder table.
CREATE FUNCTION permission_scope_ceiling_read_holder(holder_table text, holder_id bigint)
RETURNS text
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  CASE holder_table
    WHEN 'access_profiles' THEN
      RETURN (SELECT h.scope FROM access_profiles h WHERE h.id = holder_id);
    WHEN 'access_profile_templates' THEN
      RETURN (SELECT h.scope FROM access_profile_templates h WHERE h.id = holder_id);
    WHEN 'platform_access_profiles' THEN
      RETURN (SELECT 'platform'::text FROM platform_access_profiles h WHERE h.id = holder_id);
    WHEN 'platform_access_profile_templates' THEN
      RETURN (SELECT h.scope FROM platform_access_profile_templates h WHERE h.id = holder_id);
    ELSE
      RAISE EXCEPTION 'permission_scope_ceiling_read_holder: unknown holder table %', holder_table;
  END CASE;
END
$$;

-- Permissions linked to one holder whose scope the holder's scope does not accept.
CREATE FUNCTION permission_scope_ceiling_holder_violations(holder_table text, holder_id bigint, holder_scope text,
  OUT code text, OUT scope text)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  CASE holder_table
    WHEN 'access_profiles' THEN
      RETURN QUERY SELECT p.code, p.scope FROM access_profile_permissions l JOIN permissions p ON p.id = l.permission_id
        WHERE l.access_profile_id = holder_id AND p.scope <> ALL (permission_scope_ceiling(holder_scope))
        ORDER BY p.id;
    WHEN 'access_profile_templates' THEN
      RETURN QUERY SELECT p.code, p.scope FROM access_profile_template_permissions l JOIN permissions p ON p.id = l.permission_id
        WHERE l.template_id = holder_id AND p.scope <> ALL (permission_scope_ceiling(holder_scope))
        ORDER BY p.id;
    WHEN 'platform_access_profiles' THEN
      RETURN QUERY SELECT p.code, p.scope FROM platform_access_profile_permissions l JOIN permissions p ON p.id = l.permission_id
        WHERE l.platform_access_profile_id = holder_id AND p.scope <> ALL (permission_scope_ceiling(holder_scope))
        ORDER BY p.id;
    WHEN 'platform_access_profile_templates' THEN
      RETURN QUERY SELECT p.code, p.scope FROM platform_access_profile_template_permissions l JOIN permissions p ON p.id = l.permission_id
        WHERE l.template_id = holder_id AND p.scope <> ALL (permission_scope_ceiling(holder_scope))
        ORDER BY p.id;
    ELSE
      RAISE EXCEPTION 'permission_scope_ceiling_holder_violations: unknown holder table %', holder_table;
  END CASE;
END
$$;

-- The one refusal: check violation 23514 on constraint permission_scope_ceiling, naming the permission
-- code, its scope and the scopes the holder accepts.
CREATE FUNCTION permission_scope_ceiling_refuse(permission_code text, permission_scope text,
  holder_table text, holder_id bigint, holder_scope text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'permission % has scope %, above the ceiling of % % (scope %), which accepts only scope %',
      permission_code, permission_scope, holder_table, holder_id, holder_scope,
      array_to_string(permission_scope_ceiling(holder_scope), ' or ')
    USING ERRCODE = '23514',
          CONSTRAINT = 'permission_scope_ceiling',
          TABLE = holder_table,
          DETAIL = format('permission_code=%s permission_scope=%s holder_scope=%s expected_scope=%s',
            permission_code, permission_scope, holder_scope, array_to_string(permission_scope_ceiling(holder_scope), ',')),
          HINT = 'Link the permission to a holder whose scope accepts it, or keep the permission''s scope.';
END
$$;

-- BEFORE INSERT OR UPDATE on the four link tables. Reads the permission first, the holder second
-- (the lock order 0017 relies on).
CREATE FUNCTION permission_scope_ceiling_link_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  holder_table text;
  holder_id bigint;
  perm record;
  holder_scope text;
BEGIN
  CASE TG_TABLE_NAME
    WHEN 'access_profile_permissions' THEN
      holder_table := 'access_profiles'; holder_id := NEW.access_profile_id;
    WHEN 'access_profile_template_permissions' THEN
      holder_table := 'access_profile_templates'; holder_id := NEW.template_id;
    WHEN 'platform_access_profile_permissions' THEN
      holder_table := 'platform_access_profiles'; holder_id := NEW.platform_access_profile_id;
    WHEN 'platform_access_profile_template_permissions' THEN
      holder_table := 'platform_access_profile_templates'; holder_id := NEW.template_id;
    ELSE
      RAISE EXCEPTION 'permission_scope_ceiling_link_guard: not a permission link table: %', TG_TABLE_NAME;
  END CASE;

  SELECT r.code, r.scope INTO perm FROM permission_scope_ceiling_read_permission(NEW.permission_id) r;
  IF NOT FOUND THEN
    RETURN NEW; -- the foreign key reports the missing permission
  END IF;
  holder_scope := permission_scope_ceiling_read_holder(holder_table, holder_id);
  IF holder_scope IS NULL THEN
    RETURN NEW; -- the foreign key reports the missing holder
  END IF;
  IF perm.scope <> ALL (permission_scope_ceiling(holder_scope)) THEN
    PERFORM permission_scope_ceiling_refuse(perm.code, perm.scope, holder_table, holder_id, holder_scope);
  END IF;
  RETURN NEW;
END
$$;

-- AFTER UPDATE on the holders: a holder whose scope changed must still accept every linked permission.
CREATE FUNCTION permission_scope_ceiling_holder_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  bad record;
BEGIN
  IF NEW.scope IS NOT DISTINCT FROM OLD.scope THEN
    RETURN NULL;
  END IF;
  SELECT v.code, v.scope INTO bad
    FROM permission_scope_ceiling_holder_violations(TG_TABLE_NAME, NEW.id, NEW.scope) v LIMIT 1;
  IF FOUND THEN
    PERFORM permission_scope_ceiling_refuse(bad.code, bad.scope, TG_TABLE_NAME, NEW.id, NEW.scope);
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER access_profile_permissions_scope_ceiling
  BEFORE INSERT OR UPDATE ON access_profile_permissions
  FOR EACH ROW EXECUTE FUNCTION permission_scope_ceiling_link_guard();

CREATE TRIGGER access_profile_template_permissions_scope_ceiling
  BEFORE INSERT OR UPDATE ON access_profile_template_permissions
  FOR EACH ROW EXECUTE FUNCTION permission_scope_ceiling_link_guard();

CREATE TRIGGER platform_access_profile_permissions_scope_ceiling
  BEFORE INSERT OR UPDATE ON platform_access_profile_permissions
  FOR EACH ROW EXECUTE FUNCTION permission_scope_ceiling_link_guard();

CREATE TRIGGER platform_access_profile_template_permissions_scope_ceiling
  BEFORE INSERT OR UPDATE ON platform_access_profile_template_permissions
  FOR EACH ROW EXECUTE FUNCTION permission_scope_ceiling_link_guard();

-- access_profiles.scope is a stored generated column: a trigger cannot be declared UPDATE OF it, so
-- this one fires on every update and the function returns early when the scope did not change.
CREATE TRIGGER access_profiles_scope_ceiling
  AFTER UPDATE ON access_profiles
  FOR EACH ROW EXECUTE FUNCTION permission_scope_ceiling_holder_guard();

CREATE TRIGGER access_profile_templates_scope_ceiling
  AFTER UPDATE OF scope ON access_profile_templates
  FOR EACH ROW WHEN (OLD.scope IS DISTINCT FROM NEW.scope)
  EXECUTE FUNCTION permission_scope_ceiling_holder_guard();

CREATE TRIGGER platform_access_profile_templates_scope_ceiling
  AFTER UPDATE OF scope ON platform_access_profile_templates
  FOR EACH ROW WHEN (OLD.scope IS DISTINCT FROM NEW.scope)
  EXECUTE FUNCTION permission_scope_ceiling_holder_guard();

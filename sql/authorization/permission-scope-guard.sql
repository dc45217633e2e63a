-- FROZEN: loaded by migration 0013_authorization-permission-scope-guard. Never edit; put a change in a new file loaded by a new migration.
--
-- The permissions seeder updates permissions.scope at every deploy, so a rescope must pass the same
-- ceiling as a link: every holder linked to the permission, through any of the four link tables, must
-- still accept the new scope. Profiles that follow a tenant template carry no links of their own for
-- the template's permissions; they are covered by the template's links, since the composite foreign key
-- (template_id, tenant_id, scope) pins a profile's scope to its template's.

-- Holders linked to one permission whose scope does not accept permission_scope.
CREATE FUNCTION permission_scope_ceiling_permission_violations(permission_id bigint, permission_scope text,
  OUT holder_table text, OUT holder_id bigint, OUT holder_scope text)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RETURN QUERY
    SELECT 'access_profiles'::text, h.id, h.scope
      FROM access_profile_permissions l JOIN access_profiles h ON h.id = l.access_profile_id
     WHERE l.permission_id = permission_scope_ceiling_permission_violations.permission_id
       AND permission_scope <> ALL (permission_scope_ceiling(h.scope))
    UNION ALL
    SELECT 'access_profile_templates'::text, h.id, h.scope
      FROM access_profile_template_permissions l JOIN access_profile_templates h ON h.id = l.template_id
     WHERE l.permission_id = permission_scope_ceiling_permission_violations.permission_id
       AND permission_scope <> ALL (permission_scope_ceiling(h.scope))
    UNION ALL
    SELECT 'platform_access_profiles'::text, h.id, 'platform'::text
      FROM platform_access_profile_permissions l JOIN platform_access_profiles h ON h.id = l.platform_access_profile_id
     WHERE l.permission_id = permission_scope_ceiling_permission_violations.permission_id
       AND permission_scope <> ALL (permission_scope_ceiling('platform'))
    UNION ALL
    SELECT 'platform_access_profile_templates'::text, h.id, h.scope
      FROM platform_access_profile_template_permissions l JOIN platform_access_profile_templates h ON h.id = l.template_id
     WHERE l.permission_id = permission_scope_ceiling_permission_violations.permission_id
       AND permission_scope <> ALL (permission_scope_ceiling(h.scope));
END
$$;

-- AFTER UPDATE OF scope on permissions: refuses the first holder left above its ceiling.
CREATE FUNCTION permission_scope_ceiling_permission_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  bad record;
BEGIN
  SELECT v.holder_table, v.holder_id, v.holder_scope INTO bad
    FROM permission_scope_ceiling_permission_violations(NEW.id, NEW.scope) v LIMIT 1;
  IF FOUND THEN
    PERFORM permission_scope_ceiling_refuse(NEW.code, NEW.scope, bad.holder_table, bad.holder_id, bad.holder_scope);
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER permissions_scope_ceiling
  AFTER UPDATE OF scope ON permissions
  FOR EACH ROW WHEN (OLD.scope IS DISTINCT FROM NEW.scope)
  EXECUTE FUNCTION permission_scope_ceiling_permission_guard();

// OpenAPI description (served at /openapi.json, rendered at /docs, emitted to dist/openapi.json) and
// the check the emit runs over it.
import type { FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { PROTECTED_ROUTE_SECURITY } from './route-rules.ts';

export function securitySchemes(cookieName: string) {
  return {
    Bearer: { type: 'http', scheme: 'bearer', description: 'Session token: `Authorization: Bearer <token>`.' },
    SessionCookie: {
      type: 'apiKey',
      in: 'cookie',
      // The name comes from the one cookie definition (src/auth/session-cookie.ts).
      name: cookieName,
      description: 'Session cookie (HttpOnly; Secure; SameSite=Lax; Path=/), for browsers.',
    },
  } as const;
}

export async function registerOpenApi(app: FastifyInstance, cookieName: string): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'svc API',
        version: '0.1.0',
        description:
          'Multi-tenant backend service. Bodies are JSON: `{success: true, data, meta}` or `{success: false, error: {code, message}}`. ' +
          'Accept-Language selects English (default) or Portuguese messages. Instants are ISO 8601 UTC with Z.',
      },
      components: { securitySchemes: securitySchemes(cookieName) },
    },
    refResolver: {
      // Registered schemas keep their $id as component name (ErrorEnvelope), not def-0.
      buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`),
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  app.get(
    '/openapi.json',
    { config: { public: true }, schema: { hide: true } },
    async () => app.swagger(),
  );
}

type Operation = { security?: unknown; responses?: Record<string, unknown> };
type Document = {
  paths?: Record<string, Record<string, Operation>>;
  components?: { securitySchemes?: Record<string, { name?: string }> };
};

/** Problems of an OpenAPI document against the route rules; empty when it may be emitted. */
export function openApiProblems(doc: Document, cookieName: string): string[] {
  const problems: string[] = [];
  const schemes = doc.components?.securitySchemes ?? {};
  if (!schemes.Bearer) problems.push('components.securitySchemes lacks Bearer');
  if (schemes.SessionCookie?.name !== cookieName) problems.push(`SessionCookie scheme is not named ${cookieName}`);
  const expected = JSON.stringify(PROTECTED_ROUTE_SECURITY);
  for (const [path, operations] of Object.entries(doc.paths ?? {})) {
    for (const [method, op] of Object.entries(operations)) {
      const where = `${method.toUpperCase()} ${path}`;
      if (!op.responses?.['200']) problems.push(`${where} does not describe its 200 response`);
      const isProtected = op.security !== undefined || op.responses?.['401'] !== undefined;
      if (isProtected && JSON.stringify(op.security) !== expected) {
        problems.push(`${where} must declare exactly the alternative schemes Bearer and SessionCookie`);
      }
      if (isProtected && (!op.responses?.['401'] || !op.responses?.['403'])) problems.push(`${where} must describe 401 and 403`);
    }
  }
  if (Object.keys(doc.paths ?? {}).length === 0) problems.push('the document has no paths');
  return problems;
}

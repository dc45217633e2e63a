// Hides the password of every `scheme://user:password@` inside free text. The logger's key-based
// redaction cannot see into an error message, and a driver may one day quote its connection string in
// one, so the CLI's last-resort error line goes through this before it is printed. A module of its own
// so the CLI entry point does not load pino to use it.

export function withoutUrlCredentials(text: string): string {
  return text.replace(/\b([a-z][a-z0-9+.-]*:\/\/)([^\s/@:]*):[^\s/@]*@/gi, '$1$2:[REDACTED]@');
}

// A refusal test needs the error a statement or a use case raised, and must fail when it succeeded.

/** What PostgreSQL (through postgres.js) and the use cases attach to the errors they raise. */
export type Refusal = Error & { code: string; constraint_name?: string };

/** The error `work` raised (a pending query, a promise or a call); fails the test when it succeeded. */
export async function refusal(work: PromiseLike<unknown> | (() => unknown)): Promise<Refusal> {
  try {
    await (typeof work === 'function' ? work() : work);
  } catch (error) {
    return error as Refusal;
  }
  throw new Error('expected a refusal, but it succeeded');
}

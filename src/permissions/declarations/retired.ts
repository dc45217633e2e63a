// Codes that left the code base. A permission row is never deleted (it gets `deprecated_at` once a
// component does that), so a former code must stay known here: a rename (`replacesCode`) may only point
// to a code of this list, otherwise it points nowhere and the emit fails.
export interface RetiredCode {
  code: string;
  /** Why it left, for the reviewer of a rename. */
  reason: string;
}

export const retiredCodes: readonly RetiredCode[] = [];

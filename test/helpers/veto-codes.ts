/**
 * Error codes that say "not overlong" by their words alone (read as words by the general vetoes,
 * or listed in NOT_OVERLONG_CODES), with the rule each one gives. Real codes: OpenAI, Anthropic,
 * Azure and Groq bodies.
 */
export const VETO_CODES: readonly [code: string, rule: string][] = [
  ['rate_limit_exceeded', 'rate_limit'],
  ['rate_limit_error', 'rate_limit'],
  ['insufficient_quota', 'quota'],
  ['exceeded_current_quota_error', 'quota'],
  ['content_filter', 'content_filter'],
  ['content_policy_violation', 'content_filter'],
  ['invalid_api_key', 'auth'],
  ['authentication_error', 'auth'],
  ['permission_error', 'auth'],
  ['overloaded_error', 'overloaded'],
];

/*
 * A Claude Code-like Messages request with everything compaction must respect: system blocks with
 * cache_control, tools, thinking and redacted thinking in every assistant turn, tool_use /
 * tool_result pairs, an image inside a tool result, a mid-conversation user message, a
 * `role: "system"` entry inside messages, four breakpoints, and fields the gateway never reads.
 */

const CC = { type: 'ephemeral' } as const;

export function fileText(k: number, bytes = 3_000): string {
  const line = `export function f${k}(x: number): number { return x * ${k}; } // src/f${k}.ts\n`;
  return line.repeat(Math.ceil(bytes / line.length)).slice(0, bytes);
}

export interface ClaudeRequestOptions {
  turns?: number;
  /** Size of the newest tool result. */
  lastResultBytes?: number;
  /** Characters of text in the newest assistant turn (next to its thinking block). */
  lastAssistantChars?: number;
  maxTokens?: number;
  thinkingBudget?: number;
}

export function claudeRequest(o: ClaudeRequestOptions = {}): Record<string, any> {
  const turns = o.turns ?? 10;
  const messages: any[] = [
    { role: 'user', content: [{ type: 'text', text: 'Review every TypeScript file under src/ one by one, then report.' }] },
    { role: 'system', content: '# Environment\nPrimary working directory: /home/dev/shop-service' },
  ];
  for (let k = 1; k <= turns; k++) {
    const last = k === turns;
    const think =
      k % 3 === 0
        ? { type: 'redacted_thinking', data: `EmwKAhgBEgy${k}${'Q'.repeat(300)}` }
        : { type: 'thinking', thinking: `I should read src/f${k}.ts next.`, signature: `EqQBCkYIBxgC${k}${'S'.repeat(300)}` };
    const said = `Reading src/f${k}.ts. ${last ? 'r'.repeat(o.lastAssistantChars ?? 200) : ''}`;
    messages.push({
      role: 'assistant',
      content: [
        think,
        { type: 'text', text: said },
        { type: 'tool_use', id: `toolu_${k}`, name: 'Read', input: { file_path: `/src/f${k}.ts` } },
      ],
    });
    const content =
      k === 4
        ? [
            { type: 'text', text: fileText(k) },
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: `iVBORw0KGgo${'A'.repeat(6_000)}` } },
          ]
        : fileText(k, last ? o.lastResultBytes : undefined);
    const result: any = { type: 'tool_result', tool_use_id: `toolu_${k}`, content };
    if (k === 2 || last) result.cache_control = CC;
    messages.push({ role: 'user', content: [result] });
    if (k === 5) {
      messages.push({
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: 'Half done.', signature: `EqQBsig5${'S'.repeat(300)}` },
          { type: 'text', text: 'Part one is done.' },
        ],
      });
      messages.push({ role: 'user', content: 'Now also check the tests, please.' });
    }
  }
  return {
    model: 'claude-test',
    messages,
    system: [
      { type: 'text', text: 'x-anthropic-billing-header: cc_version=2.1.332; cc_entrypoint=sdk-cli;' },
      { type: 'text', text: 'You are Claude Code, an agent for software engineering.', cache_control: CC },
    ],
    tools: [
      {
        name: 'Bash',
        description: 'Run a command',
        input_schema: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
      },
      {
        name: 'Read',
        description: 'Read a file',
        input_schema: { type: 'object', properties: { file_path: { type: 'string' } }, required: ['file_path'] },
        cache_control: CC,
      },
    ],
    metadata: { user_id: '{"device_id":"34e6f8","session_id":"90fe242b"}' },
    max_tokens: o.maxTokens ?? 16_000,
    thinking: { type: 'enabled', budget_tokens: o.thinkingBudget ?? 4_000 },
    context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
    output_config: { effort: 'medium' },
    future_field: { kept: ['as', 'sent'] },
  };
}

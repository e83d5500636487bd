import type { Conversation } from '../dialects/types.js';
import { keptPrefixEnd } from '../compaction/index.js';
import { agentSessionOf, tenantOf } from '../memory/fingerprint.js';
import type { CompactionMemory, Reach, Thread, Who } from '../memory/index.js';
import { queryOf } from '../lib/url.js';
import { modelOf, type RescueContext } from './context.js';

/** The one tenant of every request without a credential, where memory.shareAnonymous allows it. */
const ANONYMOUS = 'anonymous';

/**
 * Who a request is, worked out once and carried through the rescue: its tenant (a hash of its
 * credentials), the model it names, what memory holds for its tenant, its conversation's key.
 * Each part is worked out when a decision first needs it, so a request that needs none of them
 * hashes and parses nothing.
 */
export class RequestIdentity {
  #tenant: string | null | undefined;
  #model: string | undefined;
  #who: Who | undefined;
  #reach: Promise<Reach> | undefined;
  #thread: { conversation: Conversation; thread: Thread } | undefined;

  constructor(private readonly ctx: RescueContext) {}

  /** A hash of its credentials and the `key` in its query (a Gemini key taken out of it is in clientHeaders); null: none. */
  get tenant(): string | null {
    if (this.#tenant !== undefined) return this.#tenant;
    const { path, clientHeaders, deps } = this.ctx;
    const tenant = tenantOf(clientHeaders, queryOf(path).slice(1), deps.config.memory.tenantSecret);
    return (this.#tenant = tenant ?? (deps.config.memory.shareAnonymous ? ANONYMOUS : null));
  }

  /** The model the request names: its path's, or its body's `model` (a body small enough is parsed for it). */
  get model(): string | undefined {
    return (this.#model ??= modelOf(this.ctx));
  }

  /** The model without parsing for it: the path's, or what routing read off the body's first bytes. */
  get glancedModel(): string | undefined {
    return this.#model ?? this.ctx.pathModel ?? this.ctx.notes.model;
  }

  /**
   * The request's keys in memory; null when it has no tenant. `glanced`: with the model as routing
   * read it, for a request that is not to be parsed for it.
   */
  who(glanced = false): Who | null {
    const model = glanced ? this.glancedModel : this.model;
    if (this.#who && this.#who.model === model) return this.#who;
    const tenant = this.tenant;
    if (tenant === null) return null;
    const agentSession = agentSessionOf(this.ctx.clientHeaders);
    return (this.#who = {
      tenant,
      upstream: this.ctx.upstream.memoryKey,
      api: this.ctx.dialect.api,
      ...(model !== undefined ? { model } : {}),
      ...(agentSession !== undefined ? { agentSession } : {}),
    });
  }

  reach(memory: CompactionMemory, tenant: string): Promise<Reach> {
    return (this.#reach ??= memory.reachOf(tenant));
  }

  /** The conversation as memory keys it, keyed once (its kept prefix digested); null without a tenant. */
  thread(memory: CompactionMemory, conversation: Conversation): Thread | null {
    if (this.#thread?.conversation === conversation) return this.#thread.thread;
    const who = this.who();
    if (!who) return null;
    const thread = memory.thread(who, conversation.items, keptPrefixEnd(conversation));
    this.#thread = { conversation, thread };
    return thread;
  }
}

const identities = new WeakMap<RescueContext, RequestIdentity>();

export function identityOf(ctx: RescueContext): RequestIdentity {
  let identity = identities.get(ctx);
  if (!identity) identities.set(ctx, (identity = new RequestIdentity(ctx)));
  return identity;
}

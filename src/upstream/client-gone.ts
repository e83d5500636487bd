import { EventEmitter } from 'node:events';

/**
 * Fires when the client leaves before its answer is complete, and cancels the upstream request.
 * undici takes an EventEmitter with an `aborted` field as a request's signal (a public option of
 * its request API); an AbortController per request costs EventTarget listeners (bench/findings.md),
 * so a real AbortSignal is made only when something needs one: the summarizer, on the rescue path.
 */
export class ClientGone extends EventEmitter {
  aborted = false;
  private controller?: AbortController;

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    this.emit('abort');
    this.controller?.abort(new Error('client disconnected'));
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort(new Error('client disconnected'));
    }
    return this.controller.signal;
  }
}

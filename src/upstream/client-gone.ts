import { EventEmitter } from 'node:events';

/**
 * undici takes an EventEmitter with an `aborted` field as a request's signal (public in its request API); an AbortController per
 * request costs EventTarget listeners (bench/findings.md), so a real AbortSignal is made only when needed: the summarizer's.
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

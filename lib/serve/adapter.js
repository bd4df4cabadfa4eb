// @ts-check
'use strict'
// What a route that speaks another API over chat completions (lib/serve/messages.js: Anthropic's
// Messages) shares: a stand-in for the ServerResponse that lib/serve/chat.js's `chatCompletions`
// writes into, so its answer can be mapped back before it goes out; lib/serve/responses.js (the
// Responses API) uses it too.
const { EventEmitter } = require('node:events')

/**
 * What the stand-in hands over: the stream began (`onStart`), a chat.completion (`onJson`), a
 * stream's chunk parsed (`onEvent`; null for `[DONE]`), the stream ended (`onEnd`).
 * @typedef {object} RelayTarget
 * @property {() => void} onStart
 * @property {(value: any) => void} onJson
 * @property {(value: any) => void} onEvent
 * @property {() => void} onEnd
 */

/**
 * Where chat.js writes its answer: hands its chat.completion or its events to the mapping, and
 * lends the real response's socket, `close` and `drain` (a client that leaves aborts the
 * generation, a full socket holds it back).
 */
class Relay extends EventEmitter {
  /**
   * @param {import('node:http').ServerResponse} res
   * @param {RelayTarget} to
   */
  constructor(res, to) {
    super()
    this.res = res
    this.to = to
    this.headersSent = false
    this.writableEnded = false
    this.streaming = false
    res.on('close', () => this.emit('close'))
    res.on('drain', () => this.emit('drain'))
  }

  get socket() {
    return this.res.socket
  }

  get destroyed() {
    return this.res.destroyed
  }

  /** @param {number} status @param {Record<string, any>} headers */
  writeHead(status, headers) {
    this.headersSent = true
    this.streaming = headers['content-type'] === 'text/event-stream'
    if (this.streaming) this.to.onStart()
    return this
  }

  flushHeaders() {}

  /** @param {string | Buffer} chunk */
  write(chunk) {
    for (const line of String(chunk).split('\n')) {
      if (line.startsWith('data: ')) {
        const data = line.slice('data: '.length)
        this.to.onEvent(data === '[DONE]' ? null : JSON.parse(data))
      }
    }
    return !this.res.writableNeedDrain
  }

  /** @param {string | Buffer} [chunk] */
  end(chunk) {
    if (this.writableEnded) return this
    if (chunk !== undefined) {
      if (this.streaming) this.write(chunk)
      else this.to.onJson(JSON.parse(String(chunk)))
    }
    this.writableEnded = true
    if (this.streaming) this.to.onEnd()
    return this
  }
}

module.exports = { Relay }

// @ts-check
'use strict'
// The HTTP pieces of torch-node serve, on node:http: reading a JSON body under a limit, answering
// JSON and errors in OpenAI's shape ({error: {message, type, code}}, so the `openai` client
// raises its own classes: BadRequestError, NotFoundError, ...), and server-sent events that wait
// while the socket's buffer is full.

/** A refusal with its HTTP status (and headers: Retry-After). */
class HttpError extends Error {
  /**
   * @param {number} status
   * @param {string} code
   * @param {string} message
   * @param {Record<string, string>} [headers]
   */
  constructor(status, code, message, headers = {}) {
    super(message)
    this.status = status
    this.code = code
    this.headers = headers
  }
}

/** @param {string} message */
const invalid = (message) => new HttpError(400, 'InvalidArg', message)

/**
 * A value as an error message shows it: JSON, cut at 100 characters (a request's own megabytes
 * are not echoed back; a value nested too deep for JSON.stringify is named by its type).
 * @param {unknown} v
 */
function show(v) {
  let s
  try {
    s = v === undefined ? 'undefined' : (JSON.stringify(v) ?? String(v))
  } catch {
    s = Array.isArray(v) ? 'an array nested too deep' : typeof v
  }
  return s.length > 100 ? `${s.slice(0, 100)}...` : s
}

/**
 * The body's bytes, refused past `limit` (413 at once when Content-Length says so, else as soon as
 * the bytes pass it).
 * @param {import('node:http').IncomingMessage} req
 * @param {number} limit
 * @returns {Promise<Buffer>}
 */
function readBody(req, limit) {
  return new Promise((resolve, reject) => {
    const tooLarge = () => new HttpError(413, 'PayloadTooLarge', `the body is over the limit of ${limit} bytes`)
    // Past the limit the rest is read and dropped, and the connection stays open: closing it while
    // the client still writes would reset it before the client reads the answer. The server's
    // requestTimeout bounds a client that never stops.
    if (Number(req.headers['content-length']) > limit) {
      req.resume()
      return reject(tooLarge())
    }
    /** @type {Buffer[] | null} */
    let chunks = []
    let size = 0
    req.on('data', (c) => {
      size += c.length
      if (size > limit && chunks) {
        chunks = null
        reject(tooLarge())
      } else chunks?.push(c)
    })
    req.on('end', () => chunks && resolve(Buffer.concat(chunks)))
    req.on('error', reject)
  })
}

/**
 * The body parsed as JSON, refused past `limit` bytes (as `readBody`) and when it is not JSON
 * (400 InvalidJSON).
 * @param {import('node:http').IncomingMessage} req
 * @param {number} limit
 * @returns {Promise<unknown>}
 */
async function readJson(req, limit) {
  const body = await readBody(req, limit)
  try {
    return JSON.parse(body.toString('utf8'))
  } catch (e) {
    throw new HttpError(400, 'InvalidJSON', `the body is not JSON: ${/** @type {Error} */ (e).message}`)
  }
}

/**
 * @param {import('node:http').ServerResponse} res
 * @param {number} status
 * @param {unknown} value
 * @param {Record<string, string>} [headers]
 */
function sendJson(res, status, value, headers = {}) {
  const body = Buffer.from(JSON.stringify(value))
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': body.length })
  res.end(body)
}

/** The status of an error: the server's own carry it; torch-node's coded ones by code. */
function statusOf(/** @type {any} */ e) {
  if (e instanceof HttpError) return e.status
  if (e?.code === 'QueueFull') return 503
  if (e?.code === 'InvalidArg') return 400
  if (e?.code === 'Disposed' || e?.code === 'Closed') return 503
  return 500
}

/**
 * Answers an error in OpenAI's shape; a response whose headers went out (a stream) just ends.
 * @param {import('node:http').ServerResponse} res
 * @param {any} e
 */
function sendError(res, e) {
  if (res.headersSent) return void res.end()
  const status = statusOf(e)
  const headers = { ...(e instanceof HttpError ? e.headers : {}) }
  if (status === 503) headers['retry-after'] ??= '1'
  const code = typeof e?.code === 'string' ? e.code : status >= 500 ? 'Internal' : 'BadRequest'
  const type = status >= 500 ? 'server_error' : 'invalid_request_error'
  const message = String(e?.message ?? e).split('\n')[0]
  sendJson(res, status, { error: { message, type, code } }, headers)
}

/**
 * One server-sent event's text; with `event`, its name first (the Responses API names each event
 * by its type; chat completions send data alone).
 * @param {unknown} data an object (as JSON) or a string as it is (`[DONE]`)
 * @param {string} [event]
 */
const eventText = (data, event) =>
  `${event === undefined ? '' : `event: ${event}\n`}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`

/**
 * Writes one server-sent event; waits while the socket's buffer is full. False: the client left.
 * @param {import('node:http').ServerResponse} res
 * @param {unknown} data an object (as JSON) or a string as it is (`[DONE]`)
 */
async function sendEvent(res, data) {
  if (res.destroyed) return false
  if (!res.write(eventText(data))) {
    await new Promise((resolve) => {
      const done = () => {
        res.off('drain', done)
        res.off('close', done)
        resolve(undefined)
      }
      res.on('drain', done)
      res.on('close', done)
    })
  }
  return !res.destroyed
}

/** @param {import('node:http').ServerResponse} res */
function startEvents(res) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' })
  res.flushHeaders()
}

/**
 * Refuses keys outside `keys` (OpenAI's clients send null for "not given": such keys are dropped).
 * @param {unknown} body
 * @param {string[]} keys
 * @returns {Record<string, any>}
 */
function readKeys(body, keys) {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw invalid('the body must be a JSON object')
  const unknown = Object.keys(body).filter((k) => !keys.includes(k))
  if (unknown.length) throw invalid(`unknown key ${show(unknown[0])}: accepted keys are ${keys.join(', ')}`)
  return Object.fromEntries(Object.entries(body).filter(([, v]) => v !== null))
}

/**
 * The API key a request gives, as `Authorization: Bearer <key>`: that header, or Anthropic's
 * `x-api-key` (what Anthropic's clients and curl examples send).
 * @param {import('node:http').IncomingMessage} req
 */
function authorization(req) {
  const key = req.headers['x-api-key']
  if (req.headers.authorization === undefined && typeof key === 'string') return `Bearer ${key}`
  return req.headers.authorization ?? ''
}

module.exports = {
  readBody,
  HttpError,
  invalid,
  show,
  readJson,
  sendJson,
  sendError,
  statusOf,
  authorization,
  eventText,
  sendEvent,
  startEvents,
  readKeys,
}

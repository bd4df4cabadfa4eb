// @ts-check
'use strict'
// http(s) image URLs in chats: fetched only where the server's owner turned it on (`fetchImages`:
// any host, or vLLM's `--allowed-media-domains` list), bounded in bytes, time and redirects, each
// redirect's host checked again, URLs with credentials refused, and only an image/* answer taken.
// Off (the default), such a URL is a 400 naming the option. The bytes go to the model's image
// decoder as a data URL's would.
const { HttpError } = require('./http')

/** Redirects followed for one image (each host checked against the allowed list). */
const MAX_REDIRECTS = 3
/** The longest timer Node keeps (a longer AbortSignal.timeout fires after 1 ms, or throws). */
const MAX_TIMEOUT_MS = 2 ** 31 - 1

/**
 * Who may be fetched: `null` no one (the default), `true` any http(s) host, or a set of hosts
 * (lower-case; a host matches itself and its subdomains, as vLLM's allowed domains do).
 * @typedef {null | true | Set<string>} FetchPolicy
 */

/**
 * `torch.serve`'s `fetchImages` as a policy. Throws a TypeError for anything but a boolean or an
 * array of host names.
 * @param {unknown} given
 * @returns {FetchPolicy}
 */
function policyOf(given) {
  if (given === undefined || given === false) return null
  if (given === true) return true
  if (Array.isArray(given) && given.length > 0 && given.every((h) => typeof h === 'string' && /^[\w.-]+$/.test(h))) {
    return new Set(given.map((h) => h.toLowerCase().replace(/\.$/, '')))
  }
  throw new TypeError('fetchImages: expected true, false or a non-empty array of host names')
}

/**
 * Whether `url`'s host may be fetched under `policy`.
 * @param {URL} url @param {FetchPolicy} policy
 */
function allowed(url, policy) {
  if (policy === null) return false
  if (policy === true) return true
  const host = url.hostname
    .toLowerCase()
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '')
  for (const h of policy) if (host === h || host.endsWith(`.${h}`)) return true
  return false
}

/**
 * An http(s) URL as given in an `image_url` part, parsed; null for anything else.
 * @param {string} url
 */
function httpUrl(url) {
  if (!/^https?:\/\//i.test(url)) return null
  try {
    return new URL(url)
  } catch {
    return null
  }
}

/**
 * The 400 for an http(s) URL this server does not fetch.
 * @param {string} where @param {URL} url @param {FetchPolicy} policy
 */
function refused(where, url, policy) {
  const why =
    policy === null
      ? 'this server fetches no image URL (start it with --fetch-images, or send a data:image/...;base64 URL)'
      : `${JSON.stringify(url.hostname)} is not among the hosts this server fetches from (--allowed-media-domains)`
  return new HttpError(400, 'InvalidArg', `${where}: ${why}`)
}

/**
 * Fetches one image: at most `maxBytes`, within `timeoutMs` in all, following up to 3 redirects
 * (each checked against `policy`), an image/* content type. Failures are 400s naming `where`.
 * @param {URL} url
 * @param {{ policy: FetchPolicy; maxBytes: number; timeoutMs: number; where: string; signal?: AbortSignal }} o
 * @returns {Promise<Buffer>}
 */
async function fetchImage(url, { policy, maxBytes, timeoutMs, where, signal }) {
  const bad = (/** @type {string} */ why) => new HttpError(400, 'InvalidArg', `${where}: ${why}`)
  const timeout = AbortSignal.timeout(Math.min(timeoutMs, MAX_TIMEOUT_MS))
  const stop = signal ? AbortSignal.any([signal, timeout]) : timeout
  let at = url
  try {
    for (let hop = 0; ; hop++) {
      if (!allowed(at, policy)) throw refused(where, at, policy)
      // (fetch refuses them too, in a message quoting them: a 400 that would echo a password)
      if (at.username || at.password) throw bad('an image URL with credentials (user:password@) is not fetched')
      const res = await fetch(at, { redirect: 'manual', signal: stop, headers: { accept: 'image/*' } })
      if (res.status >= 300 && res.status < 400 && res.headers.get('location')) {
        await res.body?.cancel()
        if (hop === MAX_REDIRECTS) throw bad(`more than ${MAX_REDIRECTS} redirects fetching ${shown(at)}`)
        const next = httpUrl(new URL(/** @type {string} */ (res.headers.get('location')), at).href)
        if (!next) throw bad('redirected to a URL that is not http(s)')
        at = next
        continue
      }
      if (!res.ok) {
        await res.body?.cancel()
        throw bad(`fetching ${shown(at)} answered HTTP ${res.status}`)
      }
      const type = res.headers.get('content-type') ?? ''
      if (!/^image\//i.test(type)) {
        await res.body?.cancel()
        throw bad(`${shown(at)} is not an image (content-type ${JSON.stringify(type.slice(0, 40))})`)
      }
      const length = Number(res.headers.get('content-length'))
      if (length > maxBytes) {
        await res.body?.cancel()
        throw bad(`the image at ${shown(at)} is larger than ${maxBytes} bytes`)
      }
      return await readBounded(res, maxBytes, () => bad(`the image at ${shown(at)} is larger than ${maxBytes} bytes`))
    }
  } catch (e) {
    if (e instanceof HttpError) throw e
    if (timeout.aborted) throw bad(`fetching ${shown(at)} took longer than ${timeoutMs} ms`)
    if (signal?.aborted) throw e
    throw bad(
      `cannot fetch ${shown(at)}: ${String(/** @type {any} */ (e)?.cause?.code ?? /** @type {any} */ (e)?.message)}`,
    )
  }
}

/** A URL as an error shows it: no credentials, at most 80 characters. @param {URL} url */
function shown(url) {
  return `${url.protocol}//${url.host}${url.pathname}${url.search}`.slice(0, 80)
}

/**
 * A response's body, refused past `maxBytes` as it streams (a lying or absent content-length).
 * @param {Response} res @param {number} maxBytes @param {() => Error} tooLarge
 */
async function readBounded(res, maxBytes, tooLarge) {
  /** @type {Buffer[]} */
  const chunks = []
  let size = 0
  if (!res.body) return Buffer.alloc(0)
  for await (const chunk of /** @type {AsyncIterable<Uint8Array>} */ (/** @type {unknown} */ (res.body))) {
    size += chunk.byteLength
    if (size > maxBytes) throw tooLarge()
    chunks.push(Buffer.from(chunk))
  }
  return Buffer.concat(chunks, size)
}

module.exports = { policyOf, allowed, httpUrl, refused, fetchImage }

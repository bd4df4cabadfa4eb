'use strict'
// What examples/embeddings-server.js and examples/chat-server.js answer for an unknown route and
// for an error, in OpenAI's shape ({error: {message, type, code}}), so that the `openai` client
// raises its own error classes (BadRequestError, NotFoundError, ...).

/** 404 for a route the service does not have. */
function notFound(req, res) {
  res.status(404).json({ error: { code: 'NotFound', message: `no route ${req.method} ${req.path}` } })
}

/**
 * Express's error handler: body-parser's errors (400 bad JSON, 413), the service's own (with a
 * `status`), and torch-node's coded ones (InvalidArg: the client's; QueueFull: overloaded, 503
 * with Retry-After). A stream whose headers already went out is ended as it is.
 */
// eslint-disable-next-line no-unused-vars
function errorHandler(err, req, res, next) {
  if (res.headersSent) return res.end()
  let status = err.status || err.statusCode
  let code = err.code
  if (err.type === 'entity.too.large') code = 'PayloadTooLarge'
  else if (err.type === 'entity.parse.failed') code = 'InvalidJSON'
  else if (!status && code === 'QueueFull') {
    status = 503
    res.set('Retry-After', '1')
  } else if (!status) status = code === 'InvalidArg' ? 400 : 500
  if (typeof code !== 'string') code = status >= 500 ? 'Internal' : 'BadRequest'
  const type = status >= 500 ? 'server_error' : 'invalid_request_error'
  res.status(status).json({ error: { message: err.message, type, code } })
}

module.exports = { notFound, errorHandler }

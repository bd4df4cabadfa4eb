// @ts-check
'use strict'
// The Open Inference Protocol (KServe v2) both ways, composed from the public API: a client
// (`torch.RemoteModule`, HTTP or gRPC), a server (`torch.oip.serve`, `torch.oip.router`), and
// Triton model repositories from a `.pt` (`torch.oip.writeTritonRepository`). The gRPC form
// (grpc.js) loads its optional peer dependencies on first use.
const { serve, router } = require('./server')
const { RemoteModule } = require('./remote')
const { writeTritonRepository } = require('./triton')

module.exports = { RemoteModule, oip: { serve, router, writeTritonRepository } }

'use strict'
// The Open Inference Protocol (KServe v2) both ways, composed from the public API: a client
// (`torch.RemoteModule`, HTTP or gRPC), a server (`torch.oip.serve`, `torch.oip.router`), and
// Triton model repositories from a `.pt` (`torch.oip.writeTritonRepository`).
module.exports = function oip(torch) {
  const { serve, router } = require('./server')(torch)
  return {
    RemoteModule: require('./remote')(torch),
    oip: { serve, router, writeTritonRepository: require('./triton')(torch) },
  }
}

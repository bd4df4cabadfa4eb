// The API tour (README and docs/) as a TypeScript program: it must type-check under `tsc --noEmit --strict`
// (__tests__/typescript.test.js) with no casts where the typings can know better, and the lines
// marked @ts-expect-error must stay errors.
import torch, { ones, ScriptModule, Tensor, vision, type DType, type Device, type TorchError, type IValue, type Classification } from 'torch-node'

async function tour(): Promise<void> {
  const a: Tensor = torch.ones([2, 3])
  const text: string = a.toString()
  const model = new torch.ScriptModule('models/resnet18_traced.pt')
  const logits = await model.forward(torch.rand([1, 3, 224, 224])) // Promise<Tensor> by default
  const { values, indices } = logits.softmax(1).topk(5)
  values.toArray(); indices.toTypedArray()

  // factories and options
  torch.tensor([[1, 2], [3, 4]], { dtype: 'int64', device: 'cpu', requiresGrad: false })
  torch.tensor([1, 2, 3, 4], { shape: [2, 2] })
  torch.zeros([2], { dtype: 'float64' }); torch.empty([3]); torch.full([2, 2], 7)
  torch.rand([2]); torch.randn([2]); torch.randint(0, 10, [3])
  torch.arange(5); torch.arange(0, 1, 0.25); torch.linspace(0, 1, 5); torch.eye(3)
  ones([2], true)
  const dt: DType = a.dtype
  const dev: Device = a.device
  const shape: number[] = a.shape
  a.ndim; a.requiresGrad; a.numel(); a.strides; a.storageOffset; a.isContiguous()
  a.toTypedArray(); a.asTypedArray(); torch.tensor([3]).item()
  a.to('float16'); a.to('cpu'); a.to('cuda:1'); a.to({ device: 'cpu', dtype: 'float32' }); a.cpu()
  a.softmax(1); a.logSoftmax(); a.argmax(1, true); a.argmin()
  a.dispose(); a.isDisposed
  torch.memory().tensors; torch.setNumThreads(2); torch.getNumThreads(); torch.cuda.isAvailable(); torch.cuda.deviceCount()

  // views, copies, math, in place, autograd
  const t = torch.arange(0, 12, { dtype: 'float32' })
  t.view([3, 4]); t.reshape([-1]); t.view([3, 4]).transpose(0, 1); t.view([3, 4]).t()
  t.view([3, 4]).permute([1, 0]); t.narrow(0, 1, 2); t.view([3, 4]).select(0, 1); t.slice(0, 0, -1, 2)
  t.unsqueeze(0).squeeze(); t.view([3, 4]).expand([2, 3, 4]); t.flatten(); t.chunk(2); t.split([4, 8])
  t.clone(); t.contiguous(); t.maskedSelect(t.gt(3)); t.sharesStorage(t.view([12]))
  t.add(1).sub(t).mul(2).div(t.add(1)).pow(2).matmul(t).exp().log().sqrt().abs().neg().relu()
  t.sigmoid(); t.tanh(); t.clamp(0, 1); t.eq(0); t.ne(t); t.lt(1); t.le(1); t.gt(0); t.ge(0)
  torch.where(t.gt(0), t, 0)
  t.sum(); t.sum(0, true); t.mean(); t.sort(-1, true).values
  const kept: Tensor = t.add_(1).mul_(2).sub_(t).div_(2).pow_(2).clamp_(0, 1).fill_(0).zero_().copy_(t)
  const x = torch.tensor([1, 2, 3], { requiresGrad: true })
  x.mul(x).sum().backward(); x.grad; x.detach(); x.requiresGrad_(false)
  torch.cat([t, t], 0); torch.stack([t, t])

  // memory: borrowing, lending, tidy, using
  const img = new Float32Array(3 * 4 * 4)
  torch.fromBuffer(img, [1, 3, 4, 4], { dtype: 'float32', byteOffset: 0 })
  torch.fromBuffer(new SharedArrayBuffer(16), [4])
  const label: number = torch.tidy(() => model.forwardSync(torch.rand([1, 3, 224, 224])).argmax().item() as number)
  const pair = torch.tidy(() => ({ a: torch.ones([1]), b: [torch.zeros([1])] }))
  pair.a.dispose()
  {
    using u = torch.ones([2])
    u.sum()
  }

  // modules
  const m2 = await torch.ScriptModule.load(new Uint8Array(0), { device: 'cpu', maxBytes: 1 << 30 })
  const ac = new AbortController()
  const y: Tensor = await m2.forward(torch.ones([1]), { signal: ac.signal })
  const anyOut = await m2.runMethod<IValue>('scale', y, 2.5)
  const dict = m2.forwardSync<{ [k: string]: Tensor }>(y)
  dict['logits'].shape
  m2.runMethodSync('scale', y, 2)
  m2.methodNames(); m2.namedParameters()['fc.weight']; m2.parameters(); m2.numParameters()
  m2.to('cuda'); m2.eval(); m2.train(); m2.isTraining; const d2: Device = m2.device; m2.save('copy.pt'); m2.dispose()
  const sm: ScriptModule = m2

  // images
  const photo: Tensor = await torch.image.load('photo.jpg', { resize: 256, centerCrop: 224, mean: 'imagenet' })
  torch.image.loadSync(new Uint8Array(0), { resize: [224, 224], layout: 'nhwc', dtype: 'uint8' })
  await torch.image.loadBatch(['a.jpg', 'b.png'], { resize: 256, centerCrop: 224, mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5] })
  const png: Uint8Array = torch.image.encode(torch.image.decode(png0()), 'png')
  // @ts-expect-error not a layout
  torch.image.loadSync('x.png', { layout: 'cwh' })

  // classification
  const answers: Classification[][] = await torch.vision.classify(model, ['cat.jpg', png0()], { topk: 3 })
  const best: { label: string; index: number; probability: number } = answers[0][0]
  await vision.classify(model, 'cat.jpg', { preprocess: { resize: 256, centerCrop: 224, mean: 'imagenet' }, signal: ac.signal })
  await torch.vision.classify(model, photo, { labels: torch.vision.imagenetLabels })
  const names: readonly string[] = vision.imagenetLabels
  // @ts-expect-error topk is a number
  await torch.vision.classify(model, 'cat.jpg', { topk: '3' })
  // @ts-expect-error an unknown option
  await torch.vision.classify(model, 'cat.jpg', { top: 3 })
  // @ts-expect-error the labels are read-only
  torch.vision.imagenetLabels.push('dog')

  // errors
  try {
    await model.forward(torch.ones([1, 4, 224, 224]))
  } catch (e) {
    const err = e as TorchError
    if (err.code === 'ShapeMismatch') console.log(err.message)
  }

  // what must not type-check
  // @ts-expect-error a misspelt dtype
  torch.ones([2], { dtype: 'flaot32' })
  // @ts-expect-error not a device
  a.to('gpu')
  // @ts-expect-error tidy takes synchronous functions only
  torch.tidy(async () => torch.ones([1]))
  // @ts-expect-error tensors come from factories
  new Tensor()
  // @ts-expect-error not an error code
  const bad: TorchError['code'] = 'NotACode'
  void [text, dt, dev, shape, kept, label, anyOut, d2, sm, bad, photo, png, best, names]
}

function png0(): Uint8Array {
  return new Uint8Array(0)
}

void tour

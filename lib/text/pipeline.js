// @ts-check
'use strict'
// torch.pipeline(task, folder, options): one entry point over the folders `torch-node export`
// writes, as transformers' pipeline() and transformers.js' are: the task names the class
// (feature-extraction, text-classification, text-ranking, zero-shot-classification,
// token-classification, fill-mask), the folder's manifest must fit it. The classes share
// SentenceEncoder's batching (lib/text/sentence-encoder.js).
const fs = require('node:fs')
const path = require('node:path')
const { codedError, describe } = require('../errors')
const { internals } = require('./sentence-encoder')
const { PIPELINE } = require('./logits')
const featureExtraction = require('./feature-extraction')
const textClassification = require('./text-classification')
const textRanking = require('./text-ranking')
const zeroShot = require('./zero-shot-classification')
const tokenClassification = require('./token-classification')
const fillMask = require('./fill-mask')
const { entailmentIndex } = zeroShot
const { ZeroShotImageClassificationPipeline } = require('../vision/zero-shot-image-classification')
const { ImageFeatureExtractionPipeline } = require('../vision/image-feature-extraction')
const { DepthEstimationPipeline } = require('../vision/depth-estimation')
const { ImageSegmentationPipeline } = require('../vision/image-segmentation')
const { ImageClassificationPipeline } = require('../vision/image-classification')
const { ObjectDetectionPipeline } = require('../vision/object-detection')
const { ZeroShotObjectDetectionPipeline } = require('../vision/zero-shot-object-detection')
const { TextGenerationPipeline } = require('./text-generation')
const { ImageTextToTextPipeline } = require('./image-text-to-text')
const { SpeechRecognitionPipeline } = require('../audio/speech-recognition')
const { AudioClassificationPipeline } = require('../audio/audio-classification')
const { TextToSpeechPipeline } = require('../audio/text-to-speech')
const { ZeroShotAudioClassificationPipeline } = require('../audio/zero-shot-audio-classification')

/** @import { SentenceEncoderOptions } from './sentence-encoder' */
/** @import { FeatureExtractionPipeline } from './feature-extraction' */
/** @import { TextClassificationPipeline } from './text-classification' */
/** @import { TextRankingPipeline } from './text-ranking' */
/** @import { ZeroShotClassificationPipeline } from './zero-shot-classification' */
/** @import { TokenClassificationPipeline } from './token-classification' */
/** @import { FillMaskPipeline } from './fill-mask' */
/** @import { audio } from '../../index' */

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * The tasks `torch.pipeline` takes: transformers' names, and `'sentiment-analysis'` (text-classification),
 * `'rerank'` (text-ranking), `'embeddings'` (feature-extraction), `'ner'` (token-classification).
 * @typedef {'feature-extraction' | 'embeddings' | 'text-classification' | 'sentiment-analysis' | 'text-ranking' | 'rerank' | 'zero-shot-classification' | 'token-classification' | 'ner' | 'fill-mask' | 'zero-shot-image-classification' | 'image-feature-extraction' | 'depth-estimation' | 'image-segmentation' | 'image-classification' | 'object-detection' | 'zero-shot-object-detection' | 'text-generation' | 'image-text-to-text' | 'automatic-speech-recognition' | 'audio-classification' | 'zero-shot-audio-classification' | 'text-to-speech'} PipelineTask
 */
/**
 * Options of `torch.pipeline`: `SentenceEncoder.load`'s (batching, queue bound, dtype, signal).
 * @typedef {SentenceEncoderOptions} PipelineOptions
 */

/** task -> the manifest kind its folder has, and the class. */
// Class: any, as the constructors are private to everyone but this file (the PIPELINE token).
/** @type {Record<string, {kind: string, Class: any}>} */
const TASKS = {
  'feature-extraction': { kind: 'sentence-encoder', Class: featureExtraction.FeatureExtractionPipeline },
  'text-classification': { kind: 'text-classifier', Class: textClassification.TextClassificationPipeline },
  'text-ranking': { kind: 'text-classifier', Class: textRanking.TextRankingPipeline },
  'zero-shot-classification': { kind: 'text-classifier', Class: zeroShot.ZeroShotClassificationPipeline },
  'token-classification': { kind: 'token-classifier', Class: tokenClassification.TokenClassificationPipeline },
  'fill-mask': { kind: 'masked-lm', Class: fillMask.FillMaskPipeline },
}
/** Tasks whose classes load their folders themselves (image models in lib/vision/, causal LMs): task -> the manifest kind, and the load. */
/** @type {Record<string, {kind: string | string[], what: string, load: (folder: string, options?: any) => Promise<any>}>} */
const OWN_LOAD_TASKS = {
  'zero-shot-image-classification': {
    kind: 'clip',
    what: 'a CLIPModel or SiglipModel export',
    load: ZeroShotImageClassificationPipeline.load,
  },
  'image-feature-extraction': {
    kind: ['clip', 'image-feature-extraction'],
    what: 'a CLIPModel or SiglipModel export, or a vision backbone (ViTModel, Dinov2Model, ...: python/export_vision.py)',
    load: ImageFeatureExtractionPipeline.load,
  },
  'depth-estimation': {
    kind: 'depth-estimation',
    what: 'a DPT or Depth Anything export',
    load: DepthEstimationPipeline.load,
  },
  'image-segmentation': {
    kind: 'image-segmentation',
    what: 'a Segformer, DPT, Mask2Former or DETR segmentation export',
    load: ImageSegmentationPipeline.load,
  },
  'image-classification': {
    kind: 'image-classification',
    what: 'a *ForImageClassification export (python/export_vision.py)',
    load: ImageClassificationPipeline.load,
  },
  'object-detection': {
    kind: 'object-detection',
    what: 'a DETR or YOLOS export (python/export_vision.py)',
    load: ObjectDetectionPipeline.load,
  },
  'zero-shot-object-detection': {
    kind: 'owl',
    what: 'an OwlViTForObjectDetection or Owlv2ForObjectDetection export (python/export_owl.py)',
    load: ZeroShotObjectDetectionPipeline.load,
  },
  'text-generation': { kind: 'causal-lm', what: 'a causal-LM export', load: TextGenerationPipeline.load },
  'image-text-to-text': {
    kind: 'causal-lm',
    what: 'a vision-language export (LLaVA, Gemma 3, SmolVLM, Qwen2-VL: python/export_vlm.py)',
    load: ImageTextToTextPipeline.load,
  },
  'automatic-speech-recognition': {
    kind: 'whisper',
    what: 'a WhisperForConditionalGeneration export (python/export_whisper.py)',
    load: SpeechRecognitionPipeline.load,
  },
  'audio-classification': {
    kind: 'audio-classification',
    what: 'a Wav2Vec2 / HuBERT / WavLM *ForSequenceClassification or ASTForAudioClassification export (python/export_audio.py)',
    load: AudioClassificationPipeline.load,
  },
  'zero-shot-audio-classification': {
    kind: 'clap',
    what: 'a ClapModel export (python/export_clap.py)',
    load: ZeroShotAudioClassificationPipeline.load,
  },
  'text-to-speech': {
    kind: 'text-to-speech',
    what: 'a VitsModel (MMS-TTS) export (python/export_tts.py)',
    load: TextToSpeechPipeline.load,
  },
}
/** task -> the other tasks whose folders serve it too (a reranker's logits classify; an NLI classifier's do zero-shot). */
/** @type {Record<string, string[]>} */
const SERVED_BY = { 'text-classification': ['text-ranking'], 'zero-shot-classification': ['text-classification'] }
/** @type {Record<string, string>} */
const ALIASES = {
  rerank: 'text-ranking',
  'sentiment-analysis': 'text-classification',
  embeddings: 'feature-extraction',
  ner: 'token-classification',
}

/**
 * The task a folder was exported for (its manifest's `task`, else feature-extraction for a
 * sentence encoder), or undefined where there is no readable manifest (load says why).
 * @param {string} folder @returns {string | undefined}
 */
function folderTask(folder) {
  const manifest = readManifest(folder)
  return manifest?.kind === 'sentence-encoder' ? 'feature-extraction' : manifest?.task
}

/** A folder's manifest.json, or undefined where there is none to read (load says why). @param {string} folder */
function readManifest(folder) {
  try {
    return JSON.parse(fs.readFileSync(path.join(folder, 'manifest.json'), 'utf8'))
  } catch {
    return undefined
  }
}

/**
 * A pipeline for `task` over `folder` (written by `npx torch-node export`): `'text-classification'`
 * (a `*ForSequenceClassification` export), `'text-ranking'` or `'rerank'` (a cross-encoder: one
 * logit), `'feature-extraction'` (a sentence encoder), `'zero-shot-classification'` (an NLI
 * classifier: its labels include entailment), `'token-classification'` or `'ner'` (a
 * `*ForTokenClassification` export), `'fill-mask'` (a `*ForMaskedLM` export),
 * `'zero-shot-image-classification'` and `'image-feature-extraction'` (a CLIPModel or SiglipModel
 * export), `'depth-estimation'` (DPT, Depth Anything), `'image-segmentation'` (semantic: Segformer,
 * DPT), `'image-classification'` (a `*ForImageClassification` export: ViT, ConvNeXt, ...),
 * `'object-detection'` (DETR, YOLOS), `'zero-shot-object-detection'` (OWL-ViT, OWLv2: boxes for any
 * labels), `'text-generation'` (a causal LM: `CausalLM.load`'s options), `'image-text-to-text'` (a
 * vision-language export: chats with images),
 * `'automatic-speech-recognition'` (a WhisperForConditionalGeneration export: speech to text),
 * `'zero-shot-audio-classification'` (a ClapModel export).
 * (torchvision classifiers and detectors are ScriptModules: `torch.vision.classify`, `ScriptModule`.)
 * Concurrent `run` calls share
 * forwards.
 * Errors: `InvalidArg` (an unknown task, options), `ModelLoadError` (a folder of another task).
 * @template {PipelineTask} T
 * @param {T} task
 * @param {string} folder
 * @param {PipelineOptions} [options]
 * @returns {Promise<T extends 'text-classification' | 'sentiment-analysis' ? TextClassificationPipeline
 *   : T extends 'text-ranking' | 'rerank' ? TextRankingPipeline
 *   : T extends 'zero-shot-classification' ? ZeroShotClassificationPipeline
 *   : T extends 'token-classification' | 'ner' ? TokenClassificationPipeline
 *   : T extends 'fill-mask' ? FillMaskPipeline
 *   : T extends 'zero-shot-image-classification' ? ZeroShotImageClassificationPipeline
 *   : T extends 'image-feature-extraction' ? ImageFeatureExtractionPipeline
 *   : T extends 'depth-estimation' ? DepthEstimationPipeline
 *   : T extends 'image-segmentation' ? ImageSegmentationPipeline
 *   : T extends 'image-classification' ? ImageClassificationPipeline
 *   : T extends 'object-detection' ? ObjectDetectionPipeline
 *   : T extends 'zero-shot-object-detection' ? ZeroShotObjectDetectionPipeline
 *   : T extends 'text-generation' ? TextGenerationPipeline
 *   : T extends 'image-text-to-text' ? ImageTextToTextPipeline
 *   : T extends 'automatic-speech-recognition' ? audio.SpeechRecognitionPipeline
 *   : T extends 'audio-classification' ? audio.AudioClassificationPipeline
 *   : T extends 'zero-shot-audio-classification' ? audio.ZeroShotAudioClassificationPipeline
 *   : T extends 'text-to-speech' ? audio.TextToSpeechPipeline : FeatureExtractionPipeline>}
 */
async function pipeline(task, folder, options) {
  const name = typeof task === 'string' ? (ALIASES[task] ?? task) : task
  if (typeof name !== 'string' || !(Object.hasOwn(TASKS, name) || Object.hasOwn(OWN_LOAD_TASKS, name))) {
    const known = [...Object.keys(TASKS), ...Object.keys(OWN_LOAD_TASKS), ...Object.keys(ALIASES)]
    throw codedError(
      'InvalidArg',
      `torch.pipeline: task: expected one of ${known.join(', ')}, ` + `got ${describe(task)}`,
      pipeline,
    )
  }
  if (typeof folder !== 'string') {
    throw codedError('InvalidArg', `torch.pipeline: folder: expected a path, got ${describe(folder)}`, pipeline)
  }
  if (Object.hasOwn(OWN_LOAD_TASKS, name)) {
    const { kind: want, what, load } = OWN_LOAD_TASKS[name]
    const kind = readManifest(folder)?.kind
    if (kind !== undefined && ![want].flat().includes(kind)) {
      throw codedError(
        'ModelLoadError',
        `torch.pipeline: ${folder} holds a ${JSON.stringify(kind)} model; ${name} takes ${what}`,
        pipeline,
      )
    }
    return load(folder, options)
  }
  const { kind, Class } = TASKS[name]
  const exported = folderTask(folder)
  if (exported !== undefined && exported !== name && !SERVED_BY[name]?.includes(exported)) {
    throw codedError(
      'ModelLoadError',
      `torch.pipeline: ${folder} was exported for ${exported}, not ${name} ` +
        `(npx torch-node export --task ${name} for a classifier checkpoint)`,
      pipeline,
    )
  }
  const encoder = await internals.load(folder, options, kind, pipeline)
  if (name === 'text-ranking' && encoder.dim !== 1) {
    encoder.dispose()
    throw codedError(
      'ModelLoadError',
      `torch.pipeline: ${folder}: text-ranking takes a cross-encoder (one logit); this classifier has ${encoder.dim}`,
      pipeline,
    )
  }
  if (name === 'zero-shot-classification' && entailmentIndex(/** @type {any} */ (encoder.manifest).labels) === -1) {
    const labels = /** @type {any} */ (encoder.manifest).labels
    encoder.dispose()
    throw codedError(
      'ModelLoadError',
      `torch.pipeline: ${folder}: zero-shot-classification takes an NLI classifier (a label starting with ` +
        `"entail"); this one's labels are ${labels.join(', ')}`,
      pipeline,
    )
  }
  return new Class(PIPELINE, encoder, folder)
}

module.exports.pipeline = pipeline

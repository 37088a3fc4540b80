"""The code of the book *transformer-lit*, which builds the Transformer of "Attention Is
All You Need" (Vaswani et al. 2017) and trains it to translate English into French.

Each module below is exported from one chapter's notebook (`nbs/NN_*.ipynb`), the
chapter whose number it carries, and imports only modules of earlier chapters: read
them in this order.

The building blocks
  validate        01  argument checks: one rule per kind of value, one error class
  positional      02  the sinusoidal positional encoding (section 3.5)
  attention       03  scaled dot-product and multi-head attention (3.2)
  masking         04  padding and causal masks
  norms           05  LayerNorm and the residual connection around each sub-layer
  ffn             06  the position-wise feed-forward network (3.3)
The model
  encoder         07  the encoder layer and stack
  decoder         08  the decoder layer and stack, with the decoding cache's slots
  model           09  Transformer and TransformerConfig, equal to torch.nn.Transformer
Training and translating
  recipe          10  TrainSettings and the presets (tiny, cpu, small, base, big)
  corpus          11  the Bible versions, downloaded, checked and aligned by verse
  data            12  the split by books, the subword tokenizer, batches
  training        13  label smoothing, the schedule, train_step and fit
  checkpoints     14  saving and loading a run, bit-exact on resume
  inference       15  greedy and beam-search decoding with the cache, translate
  scoring         16  BLEU and chrF, each French version as the reference in turn
  pretrained      17  the shipped model: load_pretrained()
  analysis        19  the kinds of mistakes behind a score
Engineering
  runs            20  run folders and data parallelism with torchrun
  cli.shared      21  what the command's subcommands share
  cli.train       22  transformer-lit train
  cli.translate   23  transformer-lit translate
Speed and serving
  fast            24  the faster training step, proven equal to chapter 13's
  fast_decoding   25  the faster decoding step, proven equal to chapter 15's
  export          26  the model for CTranslate2
  huggingface     27  the model as a Hugging Face folder
  argos           28  the model for Argos Translate and LibreTranslate
  cli.export      29  transformer-lit export
  cli             30  the transformer-lit command

To translate with the shipped model (1 John 4:8, a verse held out of its training):

>>> from transformer_lit.inference import translate
>>> from transformer_lit.pretrained import load_pretrained
>>> model, tokenizer = load_pretrained()
>>> english = "He who doesn't love doesn't know God, for God is love."
>>> print(*translate(model, tokenizer, [english]))
Celui qui n'aime pas ne connaît pas Dieu, car Dieu est aimé.
"""

__version__ = "0.1.0"

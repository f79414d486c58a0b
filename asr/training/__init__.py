"""Training a Speech-Transformer, in small parts; `python -m asr.train` (asr/train.py) runs it.

    build.py       TrainingSetup: device and ranks, data, tokenizer, model, loaders, optimiser
                   and schedule, and the start (checkpoint, pretrained weights or fresh CMVN)
    trainer.py     Trainer: the loop (epochs, steps, dev scoring, end-of-epoch saves, averaging)
    step.py        TrainStep: one optimiser step (accumulation, DDP, loss scaling, clipping)
    validate.py    dev loss and greedy-decoding dev WER
    state.py       TrainState and the checkpoint a killed run resumes from
    run_dir.py     the output directory: its lock, resume or start over
    pretrained.py  fine-tuning (trainer.init_from): a trained model, checked to fit the run
    faults.py      bad manifest lines and audio files (data.on_error)
    report.py      log lines, progress bars and curves (rank 0)
    options.py     the trainer settings checked first; TrainingError
"""

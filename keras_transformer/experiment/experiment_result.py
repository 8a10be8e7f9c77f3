"""What `run_experiment` returns."""

import dataclasses

from keras_transformer.evaluation import EvaluationScores


@dataclasses.dataclass(frozen=True)
class ExperimentResult:
    """The files a run wrote, its test scores and its translations."""

    # Name -> path of everything written: "data", "vocabulary", "checkpoints",
    # "train_log", "model", "translations", "scores", and "saved_model" when exported.
    paths: dict
    # Scores of the test split's translations.
    scores: EvaluationScores
    # (source, translation) pairs of the test split, in file order.
    examples: list
    # Translations of the first examples by the exported SavedModel (None: not exported).
    saved_model_examples: list | None
    # {"perplexity": float, "bleu": float} of the valid split, or None when not evaluated.
    valid_scores: dict | None
    # The `CheckpointSelection` made on the valid split (None: `select_on_valid` off).
    selection: object | None
    # Trainable parameters of the model (Table 3's "params").
    num_parameters: int
    # The model's architecture.
    model_config: dict
    # Optimizer updates the model was trained for.
    train_steps: int
    # Wall-clock minutes of the whole run: this process's, and for a resumed run the
    # training time logged before the step it resumed from.
    minutes: float
    # The training batches: pairs kept and dropped, batches, shapes, padding efficiency.
    data_summary: str = ""
    # The step a resumed run started from (0: it started from scratch), and the
    # wall-clock minutes of this process alone.
    resumed_from: int = 0
    process_minutes: float | None = None

    def format(self, num_examples=3):
        """A summary to print: examples, scores and where everything is."""
        lines = ["Examples (out: the trained model; SavedModel: the exported one):"]
        served = self.saved_model_examples or []
        for index, (source, translation) in enumerate(self.examples[:num_examples]):
            lines += [f"  in:         {source}", f"  out:        {translation}"]
            if index < len(served):
                lines.append(f"  SavedModel: {served[index]}")
        if self.selection is not None:
            lines.append(f"valid: {self.selection.format()}")
        if self.valid_scores:
            lines.append(
                f"valid: perplexity {self.valid_scores['perplexity']:.2f}, "
                f"BLEU {self.valid_scores['bleu']:.2f}"
            )
        if self.data_summary:
            lines.append("Training data: " + self.data_summary.replace("\n", "\n  "))
        lines += [self.scores.format(), "Written:"]
        width = max(len(name) for name in self.paths)
        lines += [f"  {name:<{width}}  {path}" for name, path in self.paths.items() if path]
        finished = f"Finished {self.train_steps} steps in {self.minutes:.1f} minutes"
        if self.resumed_from and self.process_minutes is not None:
            finished += (
                f" ({self.process_minutes:.1f} in this process, which resumed at step "
                f"{self.resumed_from})"
            )
        lines.append(finished + ".")
        return "\n".join(lines)

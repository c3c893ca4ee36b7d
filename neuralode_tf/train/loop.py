"""The training loop: checked settings, seeded data order, atomic checkpoints, exact resume, signals, DDP, metrics.

Exact resume rests on one rule: everything a step does is a function of the checkpointed state
(model, optimizer, scheduler, torch's random state for dropout and the like) and of the step number. The data
order of epoch ``e`` is the permutation drawn from a generator seeded with ``(seed, e)``, so the batch of step
``k`` is known without replaying the steps before it, and a resumed run on CPU reproduces the uninterrupted loss
curve bit for bit (with the same number of CPU threads: float reductions depend on it), whether it
was stopped by SIGTERM, SIGINT or SIGKILL.
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm.auto import tqdm

from ..continuous import ContinuousDepth, regularization
from ._checkpoint import CHECKPOINT, check_run_folder, random_state, restore_random_state, save_checkpoint
from ._evaluation import perplexity, scores, validation
from ._history import epoch_test, write_metrics
from ._optim import optimizer_for, schedule_for
from ._signals import StopRequest, TrainingInterrupted, stop_requests
from ._threads import cpu_threads
from ._validate import checked_setup, resumed_state, run_length
from .config import ConfigError, TrainConfig
from .setup import Setup

__all__ = ["train", "evaluate", "NonFiniteLossError"]


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or Inf; the last good checkpoint is kept."""


def train(config: TrainConfig) -> dict[str, Any]:
    """Train ``config.preset`` and return the final metrics (also written to ``out_dir``).

    A :class:`TrainConfig` takes the preset's settings for the fields it is not given, so this is the run of
    ``neuralode-tf train vit_digits --set epochs=5``, to the last bit (same seed, same threads)::

        from neuralode_tf.train import TrainConfig, train
        result = train(TrainConfig("vit_digits", epochs=5))
        print(result["test_accuracy"])

    **Checked before anything is written:** the settings' types (:class:`TrainConfig`); every ``model.*`` and
    ``data.*`` key, by building the setup and running its model forward once (:class:`ConfigError` naming the key
    and the accepted ones); the batch size; and the run folder, created if needed and probed with a file created
    and removed at once (:class:`RunFolderError`). A warm-up longer than the run warns with :class:`ScheduleWarning`.

    **What is written, and when:** ``config.json`` and ``checkpoint.pt`` together, every ``checkpoint_every`` steps,
    when stopped by a signal, and at the end; ``metrics.csv`` and ``metrics.json`` at the end. Each file is written to
    a temporary file and renamed over the old one, so a run that fails before its first checkpoint leaves an earlier
    run's folder byte for byte as it was, and a failed write (e.g. a full disk: :class:`RunFolderError`) leaves the
    last good checkpoint. Checkpoints hold only tensors, plain containers and numbers and are loaded with
    ``torch.load(weights_only=True)``; anything else is refused with :class:`CheckpointError` and not loaded.

    **Scores:** ``result["test_accuracy"]`` (NaN for a regression) and, for each name of the dataset's
    :attr:`~neuralode_tf.data.Splits.metrics` (``result["metrics"]``, the main one first), ``result["test_<name>"]``
    (GLUE's CoLA: ``test_matthews``). With ``eval_every=k``, the test accuracy and mean test loss at the end of every
    ``k``-th epoch and of the run are columns ``test_accuracy`` and ``test_loss`` of ``metrics.csv`` (NaN on the
    other steps): the evaluation changes nothing of the training, so the loss curve is that of ``eval_every=0``.

    **Language models** (``"lm"`` data, :class:`~neuralode_tf.data.TokenWindows`): the validation loss (the mean
    next-token cross-entropy over the validation windows) and the perplexity (its exponential) are computed at the end
    of each epoch and of the run, written to ``metrics.csv`` (columns ``val_loss`` and ``perplexity``, NaN on the
    other steps), returned (``result["val_loss"]``, ``result["perplexity"]``) and printed; a training window
    depends on the epoch, which each step passes to :meth:`~neuralode_tf.train.Setup.batch`. With
    ``grad_accumulation=k`` a step back-propagates ``k`` micro-batches, each loss and transport cost divided by ``k``.

    **Interruption:** a SIGTERM (cluster preemption) or SIGINT (Ctrl-C) during training stops the run at the end of
    the current step, writes a checkpoint and raises :class:`TrainingInterrupted` (the CLI exits with 128 + the
    signal's number: 143 or 130). A second signal acts at once (a second Ctrl-C raises ``KeyboardInterrupt``). The
    handlers are installed for the training steps only and restored afterwards. ``resume=True`` continues from the
    checkpoint, after a signal or a SIGKILL (then from the last periodic checkpoint), and reproduces the loss curve.

    Under ``torchrun`` (``WORLD_SIZE > 1``) each process takes its share of every global batch
    and DistributedDataParallel averages the gradients (gloo on CPU, nccl on GPU), so the run
    follows the same trajectory as one process on the same global batch.

    **Threads:** ``config.threads`` CPU threads (by default those this process may use), ``result["threads"]``.
    """
    local_processes = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    with cpu_threads(config.threads, local_processes) as threads:
        return _train(config, threads)


def _train(config: TrainConfig, threads: int) -> dict[str, Any]:
    rank, world = _init_distributed()
    device = torch.device(
        config.device if config.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    )
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"setting device={config.device!r}, but torch finds no CUDA device: use device=auto or cpu")
    if device.type == "cuda" and world > 1:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
    torch.manual_seed(config.seed)
    setup = checked_setup(config, device)
    steps_per_epoch, total = run_length(config, len(setup.train), world)
    out = Path(config.out_dir)
    state = resumed_state(config, out, total, device)
    if rank == 0:
        check_run_folder(out)

    model = setup.model
    optimizer = optimizer_for(config, model)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule_for(config, steps_per_epoch, total))

    history: list[dict[str, float]] = []
    start = 0
    checkpoint_path = out / CHECKPOINT
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        start, history = state["step"], state["history"]
        restore_random_state(state, device)
    trained = nn.parallel.DistributedDataParallel(model) if world > 1 else model

    stop = total if config.max_steps is None else min(total, config.max_steps)
    bar = tqdm(
        range(start, stop), initial=start, total=stop, disable=rank != 0 or not config.progress, desc=config.preset
    )
    local = config.batch_size // world
    done = start
    language_model = setup.data.kind == "lm"

    def save() -> None:
        state: dict[str, Any] = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
        state.update(scheduler=scheduler.state_dict(), step=done, history=history, random=random_state(device))
        save_checkpoint(out, asdict(config), state)

    with stop_requests() as request:
        for step in bar:
            epoch, index = divmod(step, steps_per_epoch)
            order = _permutation(len(setup.train), config.seed, epoch)
            rows = order[index * config.batch_size : (index + 1) * config.batch_size][rank * local : (rank + 1) * local]
            model.train()
            optimizer.zero_grad(set_to_none=True)
            batches = [setup.batch(setup.train, part, device, epoch) for part in rows.chunk(config.grad_accumulation)]
            loss, penalty, accuracy = _accumulate(trained, model, setup, batches)
            total_loss = loss + penalty
            if not _finite_everywhere(total_loss):
                raise NonFiniteLossError(
                    f"the loss became {total_loss.item()} at step {step} (epoch {epoch}); stopping. The last good "
                    f"checkpoint is {checkpoint_path if checkpoint_path.exists() else 'not written yet'}. Lower the "
                    "learning rate, use more solver steps, or clip gradients harder"
                )
            if config.grad_clip:
                nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimizer.step()
            scheduler.step()
            done = step + 1
            record = {
                "step": done,
                "epoch": epoch,
                "loss": loss.item(),
                "accuracy": accuracy,
                "nfe": float(_nfe(model)),
                "lr": scheduler.get_last_lr()[0],
                "regularization": penalty.item(),
            }
            at_epoch_end = done % steps_per_epoch == 0 and done < stop  # the last step's: the final evaluation's
            if language_model:  # validated at the end of each epoch but the last
                record.update(validation(model, setup, device, config.eval_batch_size, at_epoch_end))
            epoch_end = done // steps_per_epoch if at_epoch_end else None
            record.update(epoch_test(model, setup, device, config.eval_batch_size, config.eval_every, epoch_end))
            history.append(record)
            bar.set_postfix(loss=f"{record['loss']:.3f}", acc=f"{record['accuracy']:.2f}", nfe=int(record["nfe"]))
            if _stop_signal(request, device):
                break
            if rank == 0 and config.checkpoint_every and done % config.checkpoint_every == 0:
                save()
        bar.close()
        if rank == 0 and (done > start or not checkpoint_path.exists()):
            save()
    signum = _stop_signal(request, device)
    if signum:
        raise TrainingInterrupted(signum, done, checkpoint_path)
    test = scores(model, setup, device, config.eval_batch_size)
    accuracy, test_loss = test["accuracy"], test["loss"]
    result: dict[str, Any] = {
        "preset": config.preset,
        "steps": stop,
        "final_loss": history[-1]["loss"] if history else math.nan,
        "test_accuracy": accuracy,
        "metrics": list(setup.data.metrics),
        **{f"test_{name}": test[name] for name in setup.data.metrics},
        "parameters": sum(p.numel() for p in model.parameters()),
        "world_size": world,
        "threads": threads,
    }
    if language_model:
        result.update(val_loss=test_loss, perplexity=perplexity(test_loss))
        if history:
            history[-1].update(val_loss=test_loss, perplexity=result["perplexity"])
    if config.eval_every and history:  # the test curve's last point is the final evaluation
        history[-1].update(test_accuracy=accuracy, test_loss=test_loss)
    if rank == 0:
        write_metrics(out, history, result)
        if config.progress:
            if language_model:
                summary = (
                    f"validation loss {test_loss:.4f}, perplexity {result['perplexity']:.3f}, next-token accuracy "
                    f"{100 * accuracy:.2f}%"
                )
            elif setup.data.metrics == ("accuracy",):
                summary = f"test accuracy {100 * accuracy:.2f}%"
            else:  # GLUE's scores, x 100 as GLUE reports them
                summary = ", ".join(f"test {name} {100 * test[name]:.2f}" for name in setup.data.metrics)
            print(f"{config.preset}: {summary} ({result['parameters']:,} parameters, {stop} steps)")
    if world > 1:
        dist.barrier()
    return result


def evaluate(model: nn.Module, setup: Setup, device: torch.device, batch_size: int = 256) -> float:
    """Accuracy on the test split."""
    return scores(model, setup, device, batch_size)["accuracy"]


def _accumulate(
    trained: nn.Module, model: nn.Module, setup: Setup, batches: list[tuple[dict[str, Any], Tensor]]
) -> tuple[Tensor, Tensor, float]:
    """Back-propagate the mean over the micro-batches ``batches`` of ``loss + regularization(model)`` (``trained``
    is ``model``, or its DDP wrapper, which synchronises the gradients at the last micro-batch only).

    With ``k`` micro-batches each term is divided by ``k``, the transport cost too (the released OT-Transformer code
    divides only the logged loss, so its gradients grow with ``k``): as each term is a mean over its micro-batch,
    the gradient is that of one batch of them all whenever every micro-batch counts as many targets.

    Returns:
        The mean loss and regularisation (detached) and the mean accuracy over the micro-batches; or, at the first
        micro-batch whose loss is not finite (on any process), its loss and regularisation, not back-propagated.
    """
    k = len(batches)
    losses, penalties, accuracy = [], [], 0.0
    for i, (inputs, target) in enumerate(batches):
        with trained.no_sync() if isinstance(trained, DDP) and i < k - 1 else contextlib.nullcontext():
            logits = trained(**inputs)
            loss = setup.loss(logits, target)
            penalty = regularization(model).to(loss.device)
            if not _finite_everywhere(loss + penalty):
                return loss.detach(), penalty.detach(), math.nan
            ((loss + penalty) / k).backward()
        losses.append(loss.detach())
        penalties.append(penalty.detach())
        accuracy += setup.accuracy(logits, target) / k
    return torch.stack(losses).mean(), torch.stack(penalties).mean(), accuracy


def _permutation(n: int, seed: int, epoch: int) -> Tensor:
    generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    return torch.randperm(n, generator=generator)


def _nfe(model: nn.Module) -> int:
    return sum(m.stats.nfe for m in model.modules() if isinstance(m, ContinuousDepth) and m.stats is not None)


def _stop_signal(request: StopRequest, device: torch.device) -> int:
    """The signal that stops the run at this step boundary (0: none); under DDP the largest of every process's, so
    that all stop at the same step."""
    signum = request.signal or 0
    if dist.is_available() and dist.is_initialized():
        largest = torch.tensor(signum, device=device)
        dist.all_reduce(largest, op=dist.ReduceOp.MAX)
        signum = int(largest.item())
    return signum


def _finite_everywhere(loss: Tensor) -> bool:
    finite = torch.isfinite(loss.detach()).float()
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(finite, op=dist.ReduceOp.MIN)
    return bool(finite.item())


def _init_distributed() -> tuple[int, int]:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
    return dist.get_rank(), world

"""Rollouts on a Ray cluster: each worker is a Ray actor holding its own copy of the
environment, which does a task there (the episode, its tools, checks and sandboxed code) while
every model call it makes comes back to this process and goes through the run's client layer.

The protocol between the driver (this process) and a worker is a conversation of actor calls:
``start(task, skill)`` begins the episode on a thread of the worker and returns its first
message, and ``answer(reply)`` delivers the answer to the call the worker is waiting on and
returns its next message. A message is one of

* ``("call", request)``: the environment asked the model; the driver answers with
  ``("reply", completion)``, or ``("raise", error)`` when the client layer raised (a model
  failure, a budget spent, a prompt too large, answers pending): the worker raises the same
  error inside the environment, which unwinds as it would locally;
* ``("count", name)``: the environment counted what became of a reply (``count_outcome``);
* ``("done", result)`` or ``("failed", error)``: the episode is over.

So the journal, the meter, the budget and the endpoint limits see exactly the calls a local run
makes, in the same order per task, and a run resumed or replayed under Ray repeats itself from
its journal. A worker that dies is an infrastructure failure (:class:`ExecutionError`), never a
score.
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from skillgrad.envs.base import Environment, Split, traced_rollout
from skillgrad.errors import ConfigError, ExecutionError
from skillgrad.execution.settings import ExecutionSettings, ModelSpec
from skillgrad.models.base import ChatModel, Metered
from skillgrad.models.messages import ChatRequest, Completion
from skillgrad.records import RolloutResult, Task

log = logging.getLogger(__name__)

Message = tuple[str, Any]


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError('execution.backend: ray needs Ray: pip install "skillgrad[ray]"') from None
    return ray


# ----------------------------------------------------------------------------- worker side


class _Relay:
    """The model a worker's environment is handed: each call is a message to the driver."""

    def __init__(self, outbox: queue.Queue[Message], inbox: queue.Queue[Message]) -> None:
        self._outbox = outbox
        self._inbox = inbox

    def _ask(self, message: Message) -> Any:
        self._outbox.put(message)
        kind, value = self._inbox.get()
        if kind == "raise":
            raise value
        return value

    def complete(self, request: ChatRequest) -> Completion:
        completion: Completion = self._ask(("call", request))
        return completion

    def count_outcome(self, name: str) -> None:
        self._ask(("count", name))


class RolloutWorker:
    """The body of the worker actor (made a Ray actor class by :func:`ray_environment`);
    ``target``: the model it makes once to answer its episodes' calls, when it has one."""

    def __init__(self, env: Environment, target: ModelSpec | None = None) -> None:
        self.env = env
        self._spec = target
        self._target: ChatModel | None = None
        self._outbox: queue.Queue[Message] = queue.Queue()
        self._inbox: queue.Queue[Message] = queue.Queue()

    def ready(self) -> int:
        self._model()  # loaded once, before the first episode
        return os.getpid()

    def _model(self) -> ChatModel | None:
        if self._target is None and self._spec is not None:
            self._target = self._spec.create()
        return self._target

    def infer(self, request: ChatRequest) -> Message:
        """Answer a call of this worker's episode with its own target model (the driver's
        client layer asked for it: the call was not journaled, cached or over budget)."""
        try:
            model = self._model()
            if model is None:
                return ("failed", ExecutionError("this Ray worker holds no target model"))
            return ("done", model.complete(request))
        except Exception as exc:  # noqa: BLE001 - the boundary: the client layer judges it
            return ("failed", _portable(exc))

    def start(self, task: Task, skill: str) -> Message:
        threading.Thread(target=self._episode, args=(task, skill), daemon=True,
                         name=f"rollout-{task.id}").start()
        return self._outbox.get()

    def answer(self, message: Message) -> Message:
        self._inbox.put(message)
        return self._outbox.get()

    def _episode(self, task: Task, skill: str) -> None:
        try:
            result = traced_rollout(self.env, task, skill, _Relay(self._outbox, self._inbox))
        except BaseException as exc:  # noqa: BLE001 - the boundary: every error goes home
            self._outbox.put(("failed", _portable(exc)))
        else:
            self._outbox.put(("done", result))


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else an :class:`ExecutionError` that names it."""
    try:
        pickle.loads(pickle.dumps(exc))
    except (pickle.PicklingError, TypeError, AttributeError, ValueError):
        # It cannot be sent whole (a lock inside it, an __init__ its pickle cannot call
        # again): its type and message are.
        return ExecutionError(f"{type(exc).__name__}: {exc}")
    return exc


# ----------------------------------------------------------------------------- driver side


class RayEnvironment:
    """``env`` with its rollouts done by Ray workers; everything else is ``env``'s own.

    ``spawn()`` starts one more worker: it replaces one whose conversation broke off (the
    driver's thread was interrupted while the worker waited for an answer), which cannot be
    given another task."""

    def __init__(self, env: Environment, workers: list[Any], spawn: Callable[[], Any],
                 ray: Any) -> None:
        self._env = env
        self._ray = ray
        self._spawn = spawn
        self._idle: queue.Queue[Any] = queue.Queue()
        self.workers = list(workers)  # every worker started, for the shutdown
        self.placement: dict[str, Any] = {"backend": "ray", "workers": len(workers)}
        for worker in workers:
            self._idle.put(worker)

    def __getattr__(self, name: str) -> Any:  # the environment's other attributes
        return getattr(self._env, name)

    def tasks(self, split: Split) -> list[Task]:
        return self._env.tasks(split)

    def initial_skill(self) -> str:
        return self._env.initial_skill()

    def rollout(self, task: Task, skill: str, model: ChatModel) -> RolloutResult:
        worker = self._idle.get()
        try:
            kind, value = self._converse(worker, task, skill, model)
        except BaseException:
            self._replace(worker)
            raise
        self._idle.put(worker)
        if kind == "failed":
            raise value
        result: RolloutResult = value
        return result

    def _replace(self, worker: Any) -> None:
        """Retire a worker whose conversation broke off and start one in its place; a failure
        here is logged, so that the error that broke it off is the one raised."""
        try:
            self._ray.kill(worker)
            replacement = self._spawn()
        except Exception as exc:  # noqa: BLE001 - the original error goes on; this is logged
            log.warning("could not replace a Ray worker: %s", _first_line(exc))
            return
        self.workers.append(replacement)
        self._idle.put(replacement)

    def _converse(self, worker: Any, task: Task, skill: str, model: ChatModel) -> Message:
        """Serve the worker's model calls until its episode ends: ``("done", result)`` or
        ``("failed", the error to raise)``."""
        serving = _SERVING.set((worker, task.id))  # where a RayWorkerModel's calls go
        try:
            return self._serve(worker, task, skill, model)
        finally:
            _SERVING.reset(serving)

    def _serve(self, worker: Any, task: Task, skill: str, model: ChatModel) -> Message:
        message = _get(self._ray, worker.start.remote(task, skill), task.id)
        raised: BaseException | None = None  # what this process's client layer raised
        while True:
            kind, value = message
            if kind == "done":
                return message
            if kind == "failed":
                # The environment let the error through: raise the original object (it may
                # carry what the caller needs, e.g. the requests of AnswersPending).
                return ("failed", raised if raised is not None else value)
            if kind == "call":
                try:
                    reply: Message = ("reply", model.complete(value))
                except Exception as exc:  # noqa: BLE001 - delivered to the environment
                    raised = exc
                    reply = ("raise", _portable(exc))
            elif kind == "count":
                if isinstance(model, Metered):
                    model.count_outcome(value)
                reply = ("reply", None)
            else:  # pragma: no cover - the protocol has no other message
                raise ExecutionError(f"Ray worker sent an unknown message {kind!r}")
            message = _get(self._ray, worker.answer.remote(reply), task.id)


def _get(ray: Any, ref: Any, task_id: str) -> Message:
    try:
        message: Message = ray.get(ref)
    except ray.exceptions.RayError as exc:
        raise ExecutionError(f"the Ray worker doing task {task_id!r} failed: "
                             f"{type(exc).__name__}: {_first_line(exc)}") from exc
    return message


# The worker whose episode the calling thread serves, and its task (set by the driver thread
# for the length of one episode; each thread sees its own).
_SERVING: ContextVar[tuple[Any, str] | None] = ContextVar("skillgrad_ray_serving", default=None)


class RayWorkerModel:
    """The target model of a run whose target runs in its Ray workers
    (``execution.ray_target: workers``): a call, once the client layer here has let it
    through, is answered by the target model of the worker whose episode made it."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint  # one limit for the workers' models together

    def complete(self, request: ChatRequest) -> Completion:
        serving = _SERVING.get()
        if serving is None:
            raise ExecutionError("the target model runs in the Ray workers "
                                 "(execution.ray_target: workers), but this call came from "
                                 "outside a worker's episode")
        worker, task_id = serving
        kind, value = _get(_ray(), worker.infer.remote(request), task_id)
        if kind == "failed":
            raise value
        completion: Completion = value
        return completion


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


@contextmanager
def ray_environment(env: Environment, settings: ExecutionSettings) -> Iterator[RayEnvironment]:
    """Start ``settings.workers`` Ray workers holding ``env`` (connecting to
    ``settings.ray_address``, or starting a local cluster, unless Ray is already initialised
    in this process) and yield the view of ``env`` whose rollouts they do."""
    ray = _ray()
    started = False
    if not ray.is_initialized():
        _init(ray, settings)
        started = True
    remote: RayEnvironment | None = None
    try:
        try:
            shipped = ray.put(env)
        except Exception as exc:  # noqa: BLE001 - any pickling failure, named in one line
            raise ConfigError(f"execution.backend: ray: the {type(env).__name__} environment "
                              f"cannot be sent to Ray workers ({type(exc).__name__}: "
                              f"{_first_line(exc)})") from exc
        actor = ray.remote(num_cpus=settings.ray_cpus_per_worker)(RolloutWorker)
        target = settings.target_on_workers
        workers = [actor.remote(shipped, target) for _ in range(settings.workers)]
        remote = RayEnvironment(env, workers, lambda: actor.remote(shipped, target), ray)
        if target is not None:
            remote.placement["target"] = "workers"
        remote.placement["pids"] = _wait_ready(ray, workers, settings)
        log.info("rollouts on %d Ray workers", len(workers))
        yield remote
    finally:
        for worker in remote.workers if remote is not None else []:
            ray.kill(worker)
        if started:
            ray.shutdown()


def _init(ray: Any, settings: ExecutionSettings) -> None:
    options: dict[str, Any] = {"configure_logging": False, "log_to_driver": False}
    if settings.ray_runtime_env:
        options["runtime_env"] = settings.ray_runtime_env
    if settings.ray_address:
        options["address"] = settings.ray_address
    else:
        # A cluster started for the run fits its workers even on a small machine (their
        # rollouts mostly wait for the model, as local threads do).
        wanted = math.ceil(settings.workers * settings.ray_cpus_per_worker)
        options.update(num_cpus=max(os.cpu_count() or 1, wanted), include_dashboard=False)
    try:
        ray.init(**options)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = settings.ray_address or "a local cluster"
        raise ExecutionError(f"execution.ray_address: could not start or reach Ray at "
                             f"{where}: {_first_line(exc)}") from exc


def _wait_ready(ray: Any, workers: list[Any], settings: ExecutionSettings) -> list[int]:
    """The workers' process ids, once every one has loaded the environment."""
    refs = [w.ready.remote() for w in workers]
    done, waiting = ray.wait(refs, num_returns=len(refs), timeout=settings.ray_start_timeout)
    if waiting:
        raise ExecutionError(
            f"execution.ray_workers: {len(waiting)} of {len(refs)} Ray workers did not start "
            f"within execution.ray_start_timeout ({settings.ray_start_timeout:g} s); each needs "
            f"{settings.ray_cpus_per_worker:g} CPU (execution.ray_cpus_per_worker) and the "
            f"cluster has {ray.cluster_resources().get('CPU', 0):g}")
    try:
        return [int(pid) for pid in ray.get(refs)]
    except ray.exceptions.RayError as exc:
        raise ExecutionError(f"a Ray worker could not load the environment: "
                             f"{_first_line(exc)}") from exc

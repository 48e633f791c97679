"""The service behind the endpoint: auth, dispatch, quota, skills and tasks, no HTTP.

Checks run in this order, the first failing one answering: the body parses as JSON
(-32700); the bearer token is known and live (-32004, HTTP 401 with ``WWW-Authenticate``)
and on a paid plan (-32005); the envelope is
JSON-RPC 2.0 with ``method`` and ``id`` (-32600); the method exists (-32601); the params
are valid (-32602) and name a known skill (-32002); the pool's quota admits the request
(-32003). Requests refused before the quota spend none.

With ``protocol="1.0"`` the same checks run on A2A 1.0's methods (see :mod:`._v1`), the
version check (-32009, a missing ``A2A-Version`` header meaning 0.3) after the method's;
errors keep the service's codes and statuses, their ``data`` in 1.0's shape.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from msgspec import UNSET

from magisterium_async.testing.emulator import _v1
from magisterium_async.testing.emulator._config import PAID_PLANS, EmulatorConfig
from magisterium_async.testing.emulator._faults import FaultInjector
from magisterium_async.testing.emulator._jsonrpc import (
    EXTENDED_CARD_NOT_CONFIGURED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    PLAN_REQUIRED,
    RATE_LIMITED,
    SERVICE_METHODS,
    SKILL_NOT_FOUND,
    TASK_NOT_FOUND,
    UNAUTHORIZED,
    VERSION_NOT_SUPPORTED,
    Call,
    RPCError,
    SendRequest,
    validate_send,
    validate_task_id,
)
from magisterium_async.testing.emulator._limits import RateLimiter
from magisterium_async.testing.emulator._stats import Arrival, Stats
from magisterium_async.testing.emulator._tasks import TERMINAL_STATES, TaskStore
from magisterium_async.testing.emulator._wire import (
    Artifact,
    Message,
    Part,
    Task,
    TaskStatus,
    TextPart,
    encode,
    error_body,
    new_id,
    result_body,
    timestamp,
)
from magisterium_async.testing.emulator.content._corpus import BundledCorpus
from magisterium_async.testing.emulator.content._skills import (
    SKILLS,
    Skill,
    SkillContext,
    SkillError,
    check_failure,
    skill_input,
)
from magisterium_async.testing.emulator.oauth._records import Access
from magisterium_async.testing.emulator.oauth._server import OAuthServer
from magisterium_async.testing.emulator.oauth._wire import bearer_challenge

__all__ = ["Reply", "Service"]

_OUTCOME_BY_CODE = {
    UNAUTHORIZED: "unauthorized",
    PLAN_REQUIRED: "forbidden",
    RATE_LIMITED: "rate_limited",
}


@dataclass(slots=True)
class Reply:
    """An HTTP answer: status, JSON body, outcome for the counters, extra headers."""

    status: int
    body: bytes
    outcome: str
    headers: Mapping[str, str] | None = None


class Service:
    """The emulated service's state and request handling."""

    def __init__(self, config: EmulatorConfig) -> None:
        self.config = config
        self.corpus = config.corpus if config.corpus is not None else BundledCorpus()
        self.tasks = TaskStore(config.task_ttl, config.clock, config.max_tasks)
        self.limiter = RateLimiter(config.rate_limits, config.clock)
        self.faults = FaultInjector(config.faults)
        self.stats = Stats()
        self.oauth = OAuthServer(config, self.stats.oauth)
        self.arrivals: list[Arrival] = []
        self.context = SkillContext(
            self.corpus, config.max_results, config.qa_latency, config.today
        )
        self._token_ids: dict[str, str] = {}
        self.v1 = config.protocol == "1.0"
        self.methods = _v1.METHODS if self.v1 else SERVICE_METHODS
        """The dialect's method names, mapped to the service's."""

    def error_body(self, request_id: object, code: int, message: str, data: object) -> bytes:
        """A JSON-RPC error envelope in the dialect spoken (1.0: ``data`` as details)."""
        if self.v1:
            data = _v1.error_data(code, data)
        return error_body(request_id, code, message, data)

    def _error(self, request_id: object, error: RPCError) -> Reply:
        return Reply(
            error.status,
            self.error_body(request_id, error.code, error.message, error.data),
            _OUTCOME_BY_CODE.get(error.code, "error"),
        )

    def arrive(self) -> Arrival:
        """Note a request's arrival, now."""
        arrival = Arrival(self.config.clock.now())
        if self.config.record_arrivals:
            self.arrivals.append(arrival)
        return arrival

    def finish(self, arrival: Arrival, outcome: str) -> None:
        """Count a request's outcome."""
        arrival.outcome = outcome
        self.stats.record(arrival.method, arrival.skill, outcome)

    def asked(self, call: Call) -> str | None:
        """What a ``message/send`` asks its skill (the query, document id, date), for the
        arrivals list; ``None`` for other methods and params that do not validate."""
        if call.operation != "message/send" or call.skill is None:
            return None
        try:
            return skill_input(call.skill, self._validate_send(call.params)[0].parts)
        except RPCError:
            return None

    def token_id(self, token: str) -> str:
        """A short, stable, non-reversible name for a token."""
        name = self._token_ids.get(token)
        if name is None:
            name = hashlib.sha256(token.encode()).hexdigest()[:12]
            if len(self._token_ids) < 10_000:
                self._token_ids[token] = name
        return name

    def rate_limited(self, request_id: object, seconds: float, *, as_is: bool = False) -> Reply:
        """The -32003 answer for a wait of ``seconds``, rounded as configured unless
        ``as_is`` (a forced 429 sends exactly what it was given)."""
        if as_is:
            retry_after: int | float = int(seconds) if float(seconds).is_integer() else seconds
        else:
            retry_after = self.limiter.retry_after(seconds)
        config = self.config.rate_limits
        headers = (
            {"Retry-After": str(retry_after)} if config and config.retry_after_header else None
        )
        body = self.error_body(
            request_id, RATE_LIMITED, "Rate limit exceeded", {"retryAfter": retry_after}
        )
        return Reply(429, body, "rate_limited", headers)

    async def handle(
        self,
        call: Call,
        authorization: str | None,
        arrival: Arrival,
        failure: str | None = None,
    ) -> Reply:
        """Answer one parsed request; ``failure`` makes the skill raise with that reason."""
        if call.error is not None and call.error.code == PARSE_ERROR:
            return self._error(None, call.error)
        token = self._bearer(authorization)
        if token is not None:
            arrival.token = self.token_id(token)
        if token is None:
            return self._unauthorized(call.id, None)
        access = self.access(token)
        if not isinstance(access, Access):
            return self._unauthorized(call.id, access)
        plan = access.plan
        if plan not in PAID_PLANS:
            return self._error(call.id, RPCError(PLAN_REQUIRED))
        if call.error is not None:
            return self._error(call.id, call.error)
        try:
            if call.operation is None:
                raise RPCError(METHOD_NOT_FOUND, data={"method": call.method})
            if self.v1:
                self._check_version(call.version)
            if call.operation == "message/send":
                return await self._send(call, access.quota_key, arrival, failure)
            if call.operation == "tasks/get":
                return self._get(call)
            if call.operation == "tasks/cancel":
                return self._cancel(call)
            if call.operation == "tasks/list":
                return self._list(call, access.quota_key)
            raise RPCError(EXTENDED_CARD_NOT_CONFIGURED)
        except RPCError as error:
            return self._error(call.id, error)

    @staticmethod
    def _check_version(header: str | None) -> None:
        asked = _v1.version_problem(header)
        if asked is not None:
            raise RPCError(
                VERSION_NOT_SUPPORTED,
                f"A2A version {asked} is not supported; this server speaks {_v1.VERSION}",
                {"version": asked, "supported": _v1.VERSION},
            )

    def _validate_send(self, params: object) -> tuple[SendRequest, int | None]:
        if self.v1:
            return _v1.validate_send(params)
        return validate_send(params), None

    def access(self, token: str) -> Access | str:
        """A token's plan and quota key, or why it is refused: a fixed token of the config,
        else one the authorization server issued."""
        plan = self.config.tokens.get(token)
        if plan is not None:
            return Access(plan, token)
        return self.oauth.check(token)

    def _unauthorized(self, request_id: object, reason: str | None) -> Reply:
        detail = reason if reason is not None else "missing bearer token"
        body = self.error_body(request_id, UNAUTHORIZED, "Unauthorized", {"detail": detail})
        challenge = bearer_challenge(f"The access token is refused: {reason}" if reason else None)
        return Reply(401, body, "unauthorized", {"WWW-Authenticate": challenge})

    @staticmethod
    def _bearer(authorization: str | None) -> str | None:
        if not authorization:
            return None
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return token.strip()

    async def _send(
        self, call: Call, quota_key: str, arrival: Arrival, failure: str | None
    ) -> Reply:
        request, history_length = self._validate_send(call.params)
        skill = SKILLS.get(request.skill)
        if skill is None:
            raise RPCError(SKILL_NOT_FOUND, data={"skillId": request.skill})
        arrival.input = skill_input(skill.id, request.parts)
        wait = self.limiter.acquire(quota_key, self.config.skill_pools.get(skill.id, skill.pool))
        if wait is not None:
            return self.rate_limited(call.id, wait)
        arrival.admitted = True
        task = await self._run(skill, request, failure)
        state = task.status.state
        body = _v1.encode_task(task) if self.v1 else encode(task)
        self.tasks.put(
            task.id,
            state,
            body,
            owner=quota_key,
            context_id=task.context_id,
            timestamp=task.status.timestamp,
        )
        outcome = "ok" if state == "completed" else "failed"
        result = _v1.send_result(body, history_length) if self.v1 else body
        return Reply(200, result_body(call.id, result), outcome)

    async def _run(self, skill: Skill, request: SendRequest, failure: str | None) -> Task:
        task_id = new_id()
        context_id = request.context_id or new_id()
        user = Message(
            role="user",
            message_id=request.message_id,
            parts=request.parts,
            context_id=context_id,
            task_id=task_id,
            metadata=request.metadata if request.metadata is not None else UNSET,
        )
        try:
            if failure is not None:
                raise SkillError(failure)
            check_failure(request.parts)
            parts, reply = await skill.run(self.context, request.parts)
        except Exception as error:  # the service turns any skill exception into a failed task
            reason = str(error) if isinstance(error, SkillError) else f"Skill error: {error!r}"
            agent = self._agent(reason, context_id, task_id)
            status = TaskStatus("failed", timestamp(), agent)
            return Task(task_id, context_id, status, [], [user, agent])
        artifact = Artifact(new_id(), skill.artifact, parts)
        agent = self._agent(reply, context_id, task_id)
        status = TaskStatus("completed", timestamp())
        return Task(task_id, context_id, status, [artifact], [user, agent])

    @staticmethod
    def _agent(text: str, context_id: str, task_id: str) -> Message:
        parts: list[Part] = [TextPart(text)]
        return Message("agent", new_id(), parts, context_id=context_id, task_id=task_id)

    def _task_id(self, params: object) -> tuple[str, int | None]:
        if self.v1:
            return _v1.validate_get(params)
        return validate_task_id(params), None

    def _get(self, call: Call) -> Reply:
        task_id, history_length = self._task_id(call.params)
        found = self.tasks.get(task_id)
        if found is None:
            raise RPCError(TASK_NOT_FOUND, data={"id": task_id})
        body = found[1]
        if history_length is not None:
            body = encode(_v1.trimmed(body, history_length))
        return Reply(200, result_body(call.id, body), "ok")

    def _list(self, call: Call, owner: str) -> Reply:
        request = _v1.validate_list(call.params)
        matching = [
            task
            for task in self.tasks.newest_first(owner)
            if (request.context_id is None or task.context_id == request.context_id)
            and (request.state is None or task.state == request.state)
            and (request.after is None or (task.timestamp or "") >= request.after)
        ]
        start = [t for t in matching if request.page_token is None or t.seq < request.page_token]
        page = start[: request.page_size]
        more = len(start) > len(page)
        next_token = page[-1].seq if more and page else None
        bodies = [task.body for task in page]
        result = _v1.list_result(bodies, next_token, len(matching), request)
        return Reply(200, result_body(call.id, result), "ok")

    def _cancel(self, call: Call) -> Reply:
        task_id, _ = self._task_id(call.params)
        found = self.tasks.get(task_id)
        if found is None:
            raise RPCError(TASK_NOT_FOUND, data={"id": task_id})
        state = found[0]
        if state in TERMINAL_STATES:
            raise RPCError(INVALID_PARAMS, "Invalid state transition", {"state": state})
        raise RPCError(INTERNAL_ERROR, data={"detail": f"unexpected task state {state!r}"})

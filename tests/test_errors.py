"""The error tree: its docstring, ``__all__`` and the package's exports agree; errors
without an answer name none."""

from __future__ import annotations

import re

import magisterium_async as m


def test_timeout_is_a_connection_error() -> None:
    assert issubclass(m.APITimeoutError, m.APIConnectionError)


# The tree, __all__ and the package's exports agree ---------------------------------------


def _tree_names() -> set[str]:
    from magisterium_async import _errors

    doc = _errors.__doc__ or ""
    return set(re.findall(r"[├└]── (\w+)", doc)) | {"MagisteriumError"}


def test_the_docstring_tree_all_and_exports_agree() -> None:
    from magisterium_async import _errors

    classes = {
        name
        for name, value in vars(_errors).items()
        if isinstance(value, type) and issubclass(value, m.MagisteriumError)
    }
    exported = {name for name in _errors.__all__ if name in classes}
    assert _tree_names() == classes == exported
    assert exported <= set(m.__all__)
    assert all(getattr(m, name) is getattr(_errors, name) for name in exported)


def test_the_docstring_tree_draws_each_class_under_its_parent() -> None:
    from magisterium_async import _errors

    doc = _errors.__doc__ or ""
    stack: list[tuple[int, str]] = []
    for line in doc.splitlines():
        drawn = re.search(r"[├└]── (\w+)", line)
        if drawn is None:
            if line.strip().startswith("MagisteriumError"):
                stack = [(0, "MagisteriumError")]
            continue
        depth = drawn.start()
        while stack and stack[-1][0] >= depth:
            stack.pop()
        assert stack, line
        cls = getattr(_errors, drawn.group(1))
        assert cls.__bases__[0] is getattr(_errors, stack[-1][1]), line
        stack.append((depth, drawn.group(1)))


def test_errors_without_an_answer_name_none() -> None:
    error = m.APIConnectionError("refused")
    assert (error.status_code, error.request_id, dict(error.headers)) == (None, None, {})
    assert str(error) == "refused"

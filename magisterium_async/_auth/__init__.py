"""Signing in: where a request's bearer token comes from, and keeping a sign-in alive.

- :mod:`._tokens`: the token of each request (given, from the environment, or stored and
  refreshed before it expires; one refresh at a time).
- :mod:`._oauth`: the OAuth 2.0 steps a public client needs (discovery, registration,
  PKCE, code exchange, refresh, revocation).
- :mod:`._login`: the flows behind ``login``, ``logout`` and ``auth status``.
- :mod:`._credentials`: where credentials live and the format of their file.
- :mod:`._store` and :mod:`._redis_store`: where a sign-in is kept, behind one seam: a
  file on this host, or a key in Redis shared by every host that names it.
"""

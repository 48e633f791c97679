"""Scripts the tests run as processes of their own (clients sharing a quota or a sign-in)."""

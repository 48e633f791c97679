"""The emulator's OAuth 2.0 authorization server: clients, codes, tokens and their routes."""

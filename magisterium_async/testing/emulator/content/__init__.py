"""What the emulator's skills answer with: the corpus (bundled or synthetic), the calendar
of readings and martyrology, the directory behind the lookups, and the skills themselves."""

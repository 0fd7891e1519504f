"""What every layer shares: the settings (read once from the environment) and the root error type."""

"""Pure domain of imbucket: addressing, entities, projection, permissions, errors."""

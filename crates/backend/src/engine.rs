//! Docker and Podman, driven through their command-line clients.

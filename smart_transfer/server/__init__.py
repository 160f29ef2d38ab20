"""The FastAPI server: smart-protocol WebSocket sessions, simple-protocol REST, embedded store routes."""

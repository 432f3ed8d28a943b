"""What is dispatched: native op catalogue, kernel capability classes, prepared layouts."""

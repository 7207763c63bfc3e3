"""Running the gateway as a server: uvicorn's hosting details (`hosting`), draining and shutting down
(`shutdown`) and what start-up says or stops on (`startup_messages`)."""

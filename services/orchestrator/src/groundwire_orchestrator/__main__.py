"""python -m groundwire_orchestrator: serve the chain over gRPC."""

from groundwire_core.grpc.server import run
from groundwire_orchestrator.server import OrchestratorService
from groundwire_orchestrator.settings import OrchestratorSettings


def main() -> None:
    settings = OrchestratorSettings()
    run(OrchestratorService(settings), settings)


if __name__ == "__main__":
    main()

"""python -m groundwire_reranker: serve the configured cross-encoder over gRPC."""

from groundwire_core.grpc.server import run
from groundwire_reranker.server import RerankerService
from groundwire_reranker.settings import RerankerSettings


def main() -> None:
    settings = RerankerSettings()
    run(RerankerService(settings), settings)


if __name__ == "__main__":
    main()

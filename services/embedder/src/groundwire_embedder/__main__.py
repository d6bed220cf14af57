"""python -m groundwire_embedder: serve the configured model over gRPC."""

from groundwire_core.grpc.server import run
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings


def main() -> None:
    settings = EmbedderSettings()
    run(EmbedderService(settings), settings)


if __name__ == "__main__":
    main()

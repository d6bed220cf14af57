"""python -m groundwire_retriever: serve collections, ingest and search over gRPC."""

from groundwire_core.grpc.server import run
from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings


def main() -> None:
    settings = RetrieverSettings()
    run(RetrieverService(settings), settings)


if __name__ == "__main__":
    main()

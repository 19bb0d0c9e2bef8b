"""protoc-swift-gen's parts; tools/protoc-swift-gen.py is the program and its documentation."""

"""What several of the operator's tools share: a stack of this project driven through the Automation API
(`automation`), a stack's outputs read from its backend or a saved file (`stack_outputs`, the one reader), and the
tools' one way into Pangolin (`pangolin_api`, the only module of ssh_gateway.ops that imports providers/)."""

"""ncip.core"""
